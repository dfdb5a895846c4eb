"""Start one process per rank, wait with a deadline, always reap, collect the results."""

import multiprocessing
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .layout import ParallelLayout
from .prepare_finalize_sources import SourceVariant
from .problem import MoEProblem
from .worker import ERROR_FILE, RESULT_FILE, RunSpec, result_key, worker_main

POLL_S = 0.05
REAP_S = 5.0
# The ranks fork from one server process that has imported torch and what every rank imports first
# (vLLM's config and distributed state: ~10 s of CPU a rank on two shared cores), instead of each
# spawned rank of every run importing them again. Only imports happen there: the process groups,
# the call recorder and the source variants start in each rank, as before; calls made under an
# import are never recorded (worker.VllmCallRecorder), so the record is the same. fused_moe is the
# rest of what a rank imports (reduce_site): imported in a rank it ran under the recorder, whose
# stack walk on every call made the import cost ~2 s of CPU a rank (a contract session 27-30 s of
# CPU with it imported there, 15-17 s preloaded). The server ignores an ImportError, as before.
PRELOAD = [
    "moe_contract.rank_env",
    "torch",
    "vllm.config",
    "vllm.distributed.parallel_state",
    "vllm.model_executor.layers.fused_moe",
    "moe_contract.worker",
]


class HarnessWorkerError(RuntimeError):
    """A rank failed or the run overran its deadline; every rank has been stopped."""


@dataclass(frozen=True)
class RankResult:
    output: torch.Tensor
    output_dtype: str
    fused_output_is_reduced: bool
    dp_chunking: bool
    shared_in_op: bool


@dataclass(frozen=True)
class ContractRun:
    layout: ParallelLayout
    problems: tuple[MoEProblem, ...]
    variants: tuple[str, ...]
    per_rank: tuple[dict[str, dict[str, object]], ...]
    wall_s: float
    # Where the installed vLLM decides the reduce, and the paths the run drove to it.
    site: dict[str, object]
    paths: tuple[str, ...]
    # Every vLLM function that ran on some rank, as (file, qualified name) (worker.VllmCallRecorder).
    vllm_functions: tuple[tuple[str, str], ...]
    # Per rank: variant -> {class the fix must leave alone: its output_is_reduced()}.
    unchanged: tuple[dict[str, dict[str, bool]], ...] = ()

    def result(self, problem: MoEProblem, module: str, variant: str, rank: int, path: str) -> RankResult:
        raw = self.per_rank[rank][result_key(problem, module, variant, path)]
        return RankResult(
            output=raw["output"],
            output_dtype=str(raw["output_dtype"]),
            fused_output_is_reduced=bool(raw["fused_output_is_reduced"]),
            dp_chunking=bool(raw["dp_chunking"]),
            shared_in_op=bool(raw["shared_in_op"]),
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + REAP_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _failure_report(result_dir: Path, exit_codes: list[int | None]) -> str:
    parts = []
    for rank, code in enumerate(exit_codes):
        error = result_dir / ERROR_FILE.format(rank=rank)
        if error.exists():
            parts.append(f"--- rank {rank} (exit {code}) ---\n{error.read_text()}")
        elif code not in (0, None):
            parts.append(f"--- rank {rank} exited with {code}, no traceback written ---")
    return "\n".join(parts)


def run_contract(
    layout: ParallelLayout,
    problems: tuple[MoEProblem, ...],
    variants: tuple[SourceVariant, ...],
    workdir: Path,
    timeout_s: float = 600.0,  # a hang guard: a loaded 2-core machine takes 2-5 minutes for a layout
    fail_on_rank: int | None = None,
) -> ContractRun:
    for problem in problems:
        problem.validate_for(layout)  # bad input fails here, before any process exists
    result_dir = workdir / f"results-{layout.name}"
    result_dir.mkdir(parents=True, exist_ok=True)
    spec = RunSpec(
        layout=layout,
        problems=problems,
        variants=variants,
        init_method=f"tcp://127.0.0.1:{_free_port()}",
        result_dir=result_dir,
        fail_on_rank=fail_on_rank,
    )
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # takes effect when the server starts: the first run
    processes = [
        context.Process(target=worker_main, args=(rank, spec), name=f"moe-contract-rank{rank}")
        for rank in range(layout.world_size)
    ]
    started = time.monotonic()
    try:
        for process in processes:
            process.start()
        while True:
            codes = [process.exitcode for process in processes]
            if all(code == 0 for code in codes):
                break
            if any(code not in (None, 0) for code in codes):
                _stop(processes)
                raise HarnessWorkerError(
                    f"{layout.name}: a rank failed, all ranks stopped\n"
                    + _failure_report(result_dir, [p.exitcode for p in processes])
                )
            if time.monotonic() - started > timeout_s:
                _stop(processes)
                raise HarnessWorkerError(
                    f"{layout.name}: no result after {timeout_s:.0f}s, all ranks stopped\n"
                    + _failure_report(result_dir, [p.exitcode for p in processes])
                )
            time.sleep(POLL_S)
    finally:
        _stop(processes)
    saved = [torch.load(result_dir / RESULT_FILE.format(rank=rank)) for rank in range(layout.world_size)]
    site = saved[0]["site"]
    return ContractRun(
        layout=layout,
        problems=problems,
        variants=tuple(v.name for v in variants),
        per_rank=tuple(s["results"] for s in saved),
        wall_s=time.monotonic() - started,
        site=site,
        paths=tuple(site["paths"]),
        vllm_functions=tuple(sorted({tuple(f) for s in saved for f in s["vllm_functions"]})),
        unchanged=tuple(s["unchanged"] for s in saved),
    )
