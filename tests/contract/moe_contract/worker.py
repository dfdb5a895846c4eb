"""One rank of a contract run: real vLLM groups and runner, every case, results to disk."""

import os
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from .layout import ParallelLayout
from .prepare_finalize_sources import SourceVariant
from .problem import MoEProblem

RESULT_FILE = "rank{rank}.pt"
ERROR_FILE = "rank{rank}.error"


class InjectedFault(RuntimeError):
    """Raised on purpose to prove the launcher stops the other ranks."""


@dataclass(frozen=True)
class RunSpec:
    layout: ParallelLayout
    problems: tuple[MoEProblem, ...]
    variants: tuple[SourceVariant, ...]
    init_method: str
    result_dir: Path
    # Fault injection for the launcher's own test: this rank raises after joining the
    # groups, while the others block in their first collective.
    fail_on_rank: int | None = None


def result_key(problem: MoEProblem, module: str, variant: str) -> str:
    return f"{problem.case_id}|{module}|{variant}"


def _run_cases(rank: int, spec: RunSpec) -> dict[str, dict[str, object]]:
    from vllm.distributed import get_ep_group

    from .cpu_moe_layer import CpuAll2AllMoELayer, SharedExpertTpShard
    from .flashinfer_two_sided import MoeCommTransportDouble, load_two_sided_combine
    from .prepare_finalize_sources import load_flashinfer_nvlink_classes
    from .problem import make_tokens, make_weights
    from .vllm_layer import BACKEND_OF_MODULE, make_moe_config, make_prepare_finalize, make_runner

    layout = spec.layout
    ep_group = get_ep_group().cpu_group
    two_sided_combine = load_two_sided_combine(MoeCommTransportDouble(ep_group))
    classes = {variant.name: load_flashinfer_nvlink_classes(variant) for variant in spec.variants}
    results: dict[str, dict[str, object]] = {}
    for problem in spec.problems:
        problem.validate_for(layout)
        weights = make_weights(problem)
        tokens = make_tokens(problem)[layout.dp_rank(rank)]
        shared = (
            SharedExpertTpShard(weights, layout.tp_rank(rank), layout.tp_size, problem.dtype)
            if problem.shared_experts
            else None
        )
        for module, backend in BACKEND_OF_MODULE.items():
            moe_config = make_moe_config(problem, layout, backend)
            for variant in spec.variants:
                prepare_finalize = make_prepare_finalize(classes[variant.name][module], backend, problem, layout)
                layer = CpuAll2AllMoELayer(problem, layout, rank, weights, backend, ep_group, two_sided_combine, shared)
                runner = make_runner(moe_config, prepare_finalize, shared, layer)
                output = runner.forward(tokens.hidden_states.to(problem.dtype), tokens.router_logits)
                results[result_key(problem, module, variant.name)] = {
                    "output": output.float(),
                    "output_dtype": str(output.dtype),
                    "fused_output_is_reduced": bool(runner._fused_output_is_reduced),
                }
    return results


def worker_main(rank: int, spec: RunSpec) -> None:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    torch.set_num_threads(1)  # several ranks share two cores
    try:
        from .vllm_layer import destroy_process_groups, init_process_groups

        init_process_groups(spec.layout, rank, spec.init_method)
        if spec.fail_on_rank == rank:
            raise InjectedFault(f"rank {rank} fails on purpose")
        if spec.fail_on_rank is not None:
            torch.distributed.barrier()  # blocks forever without the failed rank
        results = _run_cases(rank, spec)
        torch.save(results, spec.result_dir / RESULT_FILE.format(rank=rank))
        destroy_process_groups()
    except BaseException:
        (spec.result_dir / ERROR_FILE.format(rank=rank)).write_text(traceback.format_exc())
        raise SystemExit(1) from None  # the traceback is in the error file, where the launcher reads it
