"""One rank of a contract run: real vLLM groups and runner, every case, results to disk."""

import os
import sys
import traceback
import types
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


def result_key(problem: MoEProblem, module: str, variant: str, path: str) -> str:
    return f"{problem.case_id}|{module}|{variant}|{path}"


class VllmCallRecorder:
    """Names every vLLM function the contract calls, as (file under vllm/, qualified name).

    Code that runs because a module is being imported (decorators, registries, the
    module bodies themselves) is left out: it is not on the reduce path, and it would
    tie the record to every unrelated line that a release touches. The contract's claim
    about a group of releases rests on these functions being byte-identical across the
    group; tests/contract/test_code_under_test.py checks that.
    """

    def __init__(self) -> None:
        import vllm

        self.package = os.path.dirname(vllm.__file__) + os.sep  # as co_filename spells it
        self.functions: set[tuple[str, str]] = set()
        self._codes: set[types.CodeType] = set()

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code in self._codes or not code.co_filename.startswith(self.package):
            return
        caller: types.FrameType | None = frame
        while caller is not None:
            if caller.f_code.co_filename.startswith("<frozen importlib"):
                return  # running under an import
            caller = caller.f_back
        self._codes.add(code)
        relative = "vllm/" + code.co_filename[len(self.package) :].replace(os.sep, "/")
        qualname = code.co_qualname
        if qualname == "<lambda>":
            # A module-level lambda (envs.py keeps one per variable) has no name of its own:
            # its line tells code_under_test which one ran.
            qualname = f"<lambda>@{code.co_firstlineno}"
        self.functions.add((relative, qualname))


def _run_cases(rank: int, spec: RunSpec, recorder: "VllmCallRecorder") -> dict[str, object]:
    from vllm.distributed import get_ep_group

    from .cpu_moe_layer import CpuAll2AllMoELayer, SharedExpertTpShard
    from .flashinfer_two_sided import MoeCommTransportDouble, load_two_sided_combine
    from .paths import release_line
    from .prepare_finalize_sources import load_line_modules
    from .problem import make_tokens, make_weights
    from .vllm_layer import MoEBlock, make_moe_config, make_prepare_finalize, reduce_site

    layout = spec.layout
    line = release_line()
    site = reduce_site()
    ep_group = get_ep_group().cpu_group
    two_sided_combine = load_two_sided_combine(MoeCommTransportDouble(ep_group))
    modules = {variant.name: load_line_modules(variant) for variant in spec.variants}
    # What the classes the fix must leave alone report, built as vLLM builds them here.
    unchanged = {
        variant.name: {
            name: bool(
                make_prepare_finalize(
                    getattr(modules[variant.name][module], name), spec.problems[0], layout
                ).output_is_reduced()
            )
            for module, name in line.unchanged
        }
        for variant in spec.variants
    }
    results: dict[str, dict[str, object]] = {}
    profiled: set[tuple[bool, str]] = set()
    for problem in spec.problems:
        problem.validate_for(layout)
        # Profiling every call doubles the run; the vLLM code a problem reaches depends
        # only on these two of its properties, so one problem of each kind is recorded.
        kind = (problem.shared_experts, problem.payload_dtype)
        sys.setprofile(None if kind in profiled else recorder)
        profiled.add(kind)
        weights = make_weights(problem)
        tokens = make_tokens(problem)[layout.dp_rank(rank)]
        shared = (
            SharedExpertTpShard(weights, layout.tp_rank(rank), layout.tp_size, problem.dtype)
            if problem.shared_experts
            else None
        )
        for fixed in line.classes:
            module = fixed.module
            moe_config = make_moe_config(problem, layout, fixed)
            for variant in spec.variants:
                for path in site.paths:
                    cls = getattr(modules[variant.name][module], fixed.name)
                    prepare_finalize = make_prepare_finalize(cls, problem, layout)
                    layer = CpuAll2AllMoELayer(
                        problem, layout, rank, weights, fixed.combine, ep_group, two_sided_combine, shared
                    )
                    block = MoEBlock(site, path, moe_config, prepare_finalize, shared, layer, fixed.overlap)
                    output = block(tokens.hidden_states.to(problem.dtype), tokens.router_logits)
                    facts = block.facts
                    results[result_key(problem, module, variant.name, path)] = {
                        "output": output.float(),
                        "output_dtype": str(output.dtype),
                        "fused_output_is_reduced": facts.fused_output_is_reduced,
                        "dp_chunking": facts.dp_chunking,
                        "shared_in_op": facts.shared_in_op,
                    }
    return {
        "results": results,
        "site": {
            "file": site.file,
            "runner": site.runner_class,
            "function": site.function,
            "decision": site.decision,
            "paths": site.paths,
        },
        "unchanged": unchanged,
    }


def worker_main(rank: int, spec: RunSpec) -> None:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    torch.set_num_threads(1)  # several ranks share two cores
    try:
        from .vllm_layer import destroy_process_groups, init_process_groups

        recorder = VllmCallRecorder()
        sys.setprofile(recorder)
        init_process_groups(spec.layout, rank, spec.init_method)
        if spec.fail_on_rank == rank:
            raise InjectedFault(f"rank {rank} fails on purpose")
        if spec.fail_on_rank is not None:
            torch.distributed.barrier()  # blocks forever without the failed rank
        run = _run_cases(rank, spec, recorder)
        sys.setprofile(recorder)
        destroy_process_groups()
        sys.setprofile(None)
        torch.save(
            {**run, "vllm_functions": sorted(recorder.functions)}, spec.result_dir / RESULT_FILE.format(rank=rank)
        )
    except BaseException:
        (spec.result_dir / ERROR_FILE.format(rank=rank)).write_text(traceback.format_exc())
        raise SystemExit(1) from None  # the traceback is in the error file, where the launcher reads it
