"""vLLM's reduce decision on a GPU: its runner, its two-sided prepare/finalize, FlashInfer's kernels.

One rank of `python tests/kernel/ep_launcher.py --ep N --program python3
tests/kernel/vllm_reduce_gpu.py -- --tp T` (N = TP x DP ranks, all on this machine's GPUs;
several may share one). Each rank builds, with the installed vLLM release's own code:
the TP/DP/EP GroupCoordinators, FusedMoEParallelConfig/FusedMoEConfig for
`--all2all-backend flashinfer_nvlink_two_sided`, vLLM's FlashInferNVLinkTwoSidedManager
(MNNVL workspaces through FlashInfer), the prepare/finalize class loaded from our patched
file or from the release's pristine file, a FusedMoEKernel around it, and a MoERunner whose
forward goes through vLLM's `moe_forward` custom op to `MoERunner._forward_impl`. Dispatch
and combine are FlashInfer's real kernels on the GPU; then the runner takes its reduce
decision and, where it decides to, all-reduces over the TP group.

Stand-ins, each because the real thing cannot run here:
- the TP/DP/EP groups' device communicator is vLLM's own DeviceCommunicatorBase, whose
  all_reduce is torch.distributed.all_reduce over the group's gloo device group, instead of
  CudaCommunicator (pynccl, custom all-reduce): NCCL refuses two ranks on one GPU. This is
  the TP all-reduce whose presence the decision controls;
- vLLM's compiled op libraries (vllm._C is 88 MB, more than a device call carries) are
  empty modules: nothing on this path calls one of their ops, and a call would fail loudly;
- the experts kernel is a torch computation of the gated-SiLU experts on the GPU
  (GpuExpertsDouble), shaped as vLLM's bf16 TRT-LLM experts are (unquantized input, weights
  applied and summed over this rank's experts before finalize); the router is torch top-k
  with renormalisation (vLLM's fused top-k is compiled code);
- the FusedMoE layer is an object with the attributes the custom op and the unquantized
  method read (FusedMoE.__init__ needs the engine's VllmConfig), as in the CPU harness.

The one-sided class is not driven: vLLM 0.20 builds it only for nvfp4 activations
(all2all_utils refuses bf16), and its workspace is sized for nvfp4 dispatch.

Expected: with patch 0001 (`output_is_reduced() -> True`) the output equals the dense
float32 reference; with the pristine file (`False`) it is the reference times the TP size.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import os
import sys
import time
import tomllib
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# A script: it reaches the contract harness (problem, reference, layout) and the kernel helpers as
# pytest's pythonpath would.
sys.path[:0] = [str(REPO / "tests" / "contract"), str(HERE)]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

LAYER_NAME = "model.layers.0.mlp.experts"
MODULE = "flashinfer_nvlink_two_sided"
CLASS = "FlashInferNVLinkTwoSidedPrepareAndFinalize"
PACKAGE = "vllm.model_executor.layers.fused_moe.prepare_finalize"
PATCHED, PRISTINE = "patched", "pristine"
RELATIVE_TOLERANCE = 4e-2  # bf16, as tests/contract/moe_contract/checks.py
COMPILED_OPS = ("vllm._C", "vllm._C_stable_libtorch")
# The ops of vllm._C that vLLM calls while its modules are imported on a CUDA platform: whether
# CUTLASS's fp8 GEMMs exist (quantization/utils/w8a8_utils.py). Without the library they do not,
# so the stand-ins answer False; the bf16 path here never asks again.
IMPORT_TIME_OPS = {
    "cutlass_scaled_mm_supports_fp8(int cuda_device_capability) -> bool": False,
    "cutlass_scaled_mm_supports_block_fp8(int cuda_device_capability) -> bool": False,
}
_LIBRARIES: list[Any] = []  # a torch.library.Library must stay alive for its ops to stay defined


def stub_compiled_ops() -> list[str]:
    """Stand-ins for vLLM's compiled op libraries where they are absent (the module docstring says why)."""
    stubbed = []
    for name in COMPILED_OPS:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = types.ModuleType(name)
            stubbed.append(name)
    if "vllm._C" in stubbed:
        library = torch.library.Library("_C", "FRAGMENT")
        for schema, answer in IMPORT_TIME_OPS.items():
            library.define(schema)
            library.impl(schema.split("(")[0], lambda *args, _answer=answer: _answer, "CompositeExplicitAutograd")
            stubbed.append(f"torch.ops._C.{schema.split('(')[0]} -> {answer}")
        _LIBRARIES.append(library)
    return stubbed


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def variant_file(variant: str) -> Path:
    """Ours from vendor/; pristine from the installed release, which must be the pinned tag's file."""
    if variant == PATCHED:
        return REPO / "vendor" / "vllm_fused_moe" / "prepare_finalize" / f"{MODULE}.py"
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))).parent / Path(*PACKAGE.split(".")) / f"{MODULE}.py"
    pinned = tomllib.loads((REPO / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml").read_text())
    want = pinned["files"][f"{MODULE}.py"]
    if sha256(path) != want:
        raise RuntimeError(f"{path} is not the pinned release's file (UPSTREAM.toml {want[:12]}...)")
    return path


def load_class(variant: str) -> type:
    # vLLM's fused_moe package imports the upstream module itself (all2all_utils): import it first,
    # then our copy replaces the entry in sys.modules (as moe_contract/prepare_finalize_sources.py).
    importlib.import_module("vllm.model_executor.layers.fused_moe.runner.moe_runner")
    path = variant_file(variant)
    name = f"{PACKAGE}.{MODULE}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return getattr(module, CLASS)


def device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


def init_groups(layout: Any, rank: int) -> str:
    """vLLM's groups over gloo, every rank on GPU 0 of this machine (LOCAL_RANK modulo the GPUs)."""
    from unittest import mock

    from vllm.distributed import parallel_state as ps
    from vllm.platforms import current_platform

    base = "vllm.distributed.device_communicators.base_device_communicator.DeviceCommunicatorBase"
    local = int(os.environ.get("LOCAL_RANK", "0")) % max(torch.cuda.device_count(), 1)
    torch.cuda.set_device(local)
    init = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    # Stand-in (module docstring): the platform's communicator class, for these groups only.
    with mock.patch.object(type(current_platform), "get_device_communicator_cls", classmethod(lambda cls: base)):
        ps.init_distributed_environment(layout.world_size, rank, init, local, backend="gloo")
        ps._TP = ps.init_model_parallel_group(layout.tp_groups(), local, "gloo", group_name="tp")
        ps._DP = ps.init_model_parallel_group(layout.dp_groups(), local, "gloo", group_name="dp")
        ps._EP = ps.init_model_parallel_group([list(range(layout.world_size))], local, "gloo", group_name="ep")
    from vllm.distributed.device_communicators.all2all import FlashInferNVLinkTwoSidedManager

    ep = ps.get_ep_group()
    assert ep.device_communicator is not None
    # What CudaCommunicator makes for --all2all-backend flashinfer_nvlink_two_sided.
    ep.device_communicator.all2all_manager = FlashInferNVLinkTwoSidedManager(ep.cpu_group)
    return type(ps.get_tp_group().device_communicator).__name__


def make_experts_double(moe_config: Any, quant_config: Any) -> Any:
    import vllm.model_executor.layers.fused_moe.modular_kernel as mk
    from vllm.model_executor.layers.fused_moe.topk_weight_and_reduce import TopKWeightAndReduceNoOP

    class GpuExpertsDouble(mk.FusedMoEExpertsModular):
        """Test double for vLLM's bf16 experts kernel (module docstring)."""

        @staticmethod
        def activation_format() -> Any:
            return mk.FusedMoEActivationFormat.Standard

        @staticmethod
        def _supports_current_device() -> bool:
            return True

        @staticmethod
        def _supports_no_act_and_mul() -> bool:
            return False

        @staticmethod
        def _supports_quant_scheme(*args: Any) -> bool:
            return True

        @staticmethod
        def _supports_activation(activation: Any) -> bool:
            return True

        @staticmethod
        def _supports_parallel_config(moe_parallel_config: Any) -> bool:
            return True

        def supports_expert_map(self) -> bool:
            return True

        @property
        def expects_unquantized_inputs(self) -> bool:
            return True  # as TrtLlmBf16Experts: prepare dispatches the bf16 activations as they are

        def workspace_shapes(self, M: int, N: int, K: int, *rest: Any) -> Any:
            return (M, K), (M, N // 2), (M, K)

        def finalize_weight_and_reduce_impl(self) -> Any:
            return TopKWeightAndReduceNoOP()

        def apply(
            self,
            output: torch.Tensor,
            hidden_states: torch.Tensor,
            w1: torch.Tensor,
            w2: torch.Tensor,
            topk_weights: torch.Tensor,
            topk_ids: torch.Tensor,
            activation: Any,
            global_num_experts: int,
            expert_map: torch.Tensor | None,
            *rest: Any,
            **kwargs: Any,
        ) -> None:
            ids = topk_ids.long()
            # FlashInfer's two-sided prepare marks the slots another rank serves with the id
            # num_experts (trtllm_alltoall_prepare.cu: experts[j] = slotCount): out of range, skipped.
            valid = (ids >= 0) & (ids < global_num_experts)
            safe = ids.clamp(0, global_num_experts - 1)
            local = torch.where(valid, expert_map[safe] if expert_map is not None else safe, -1)
            self.slots_seen = {
                "rows": int(ids.shape[0]),
                "out_of_range": int((~valid).sum().item()),
                "local": int((local >= 0).sum().item()),
            }
            acc = torch.zeros(hidden_states.shape, dtype=torch.float32, device=hidden_states.device)
            for e in range(w1.shape[0]):
                rows, slots = (local == e).nonzero(as_tuple=True)
                if rows.numel() == 0:
                    continue
                x = hidden_states[rows].float()
                gate, up = (x @ w1[e].float().T).chunk(2, dim=-1)
                y = (torch.nn.functional.silu(gate) * up).to(hidden_states.dtype).float() @ w2[e].float().T
                acc.index_add_(0, rows, y * topk_weights[rows, slots].float()[:, None])
            output.copy_(acc.to(output.dtype))

    return GpuExpertsDouble(moe_config, quant_config)


def make_quant_method(moe_config: Any, kernel: Any, quant_config: Any) -> Any:
    from vllm.model_executor.layers.fused_moe.fused_moe_method_base import FusedMoEMethodBase

    class KernelOwner(FusedMoEMethodBase):
        """Owns the real FusedMoEKernel and applies it as vLLM's UnquantizedFusedMoEMethod.forward_native
        does (that class is a CustomOp, which needs the engine's compilation config to be built)."""

        def create_weights(self, *args: Any, **kwargs: Any) -> None:
            raise NotImplementedError("weights live on the layer double")

        def get_fused_moe_quant_config(self, layer: torch.nn.Module) -> Any:
            return quant_config

        def apply(
            self,
            layer: Any,
            x: torch.Tensor,
            topk_weights: torch.Tensor,
            topk_ids: torch.Tensor,
            shared_experts_input: Any,
        ) -> Any:
            return self.moe_kernel.apply(
                hidden_states=x,
                w1=layer.w13_weight,
                w2=layer.w2_weight,
                topk_weights=topk_weights,
                topk_ids=topk_ids,
                activation=layer.activation,
                apply_router_weight_on_input=layer.apply_router_weight_on_input,
                global_num_experts=layer.global_num_experts,
                expert_map=layer.expert_map,
                shared_experts_input=shared_experts_input,
            )

    method = KernelOwner(moe_config)
    method.moe_kernel = kernel
    return method


class TopKRouterDouble:
    """Test double for vLLM's router: top-k, then softmax over the chosen logits (Renormalize)."""

    def __init__(self, top_k: int) -> None:
        self.top_k = top_k

    def select_experts(self, hidden_states: torch.Tensor, router_logits: torch.Tensor, **kwargs: Any) -> Any:
        from moe_contract.problem import route_top_k

        weights, ids = route_top_k(router_logits, self.top_k)
        return weights.float(), ids.to(torch.int32)


class LayerDouble(torch.nn.Module):
    """What vLLM's moe_forward custom op and the unquantized method read from the FusedMoE layer."""

    def __init__(self, runner: Any, w13: torch.Tensor, w2: torch.Tensor, num_experts: int, expert_map: torch.Tensor):
        from vllm.model_executor.layers.fused_moe.activation import MoEActivation

        super().__init__()
        self.runner = runner
        self.w13_weight, self.w2_weight = w13, w2
        self.activation = MoEActivation.SILU
        self.apply_router_weight_on_input = False
        self.global_num_experts = num_experts
        self.expert_map = expert_map

    def ensure_moe_quant_config_init(self) -> None:
        pass


@contextlib.contextmanager
def forward_context(layer: torch.nn.Module, tokens_per_dp_rank: tuple[int, ...]) -> Iterator[None]:
    """The model runner's forward context: the layer under its name, and the DP token counts."""
    from vllm import forward_context as fc

    values = {
        "no_compile_layers": {LAYER_NAME: layer},
        "attn_metadata": {},
        "slot_mapping": {},
        "virtual_engine": 0,
        "dp_metadata": fc.DPMetadata(torch.tensor(tokens_per_dp_rank, dtype=torch.int32)),
    }
    fields = {f.name for f in dataclasses.fields(fc.ForwardContext)}
    with fc.override_forward_context(fc.ForwardContext(**{k: v for k, v in values.items() if k in fields})):
        yield


def run_block(cls: type, problem: Any, layout: Any, rank: int, entry: str) -> tuple[torch.Tensor, dict[str, Any]]:
    from vllm.model_executor.layers.fused_moe.config import FusedMoEQuantConfig
    from vllm.model_executor.layers.fused_moe.modular_kernel import FusedMoEKernel
    from vllm.model_executor.layers.fused_moe.runner import moe_runner

    from moe_contract.paths import NVLINK_CLASSES
    from moe_contract.problem import make_tokens, make_weights
    from moe_contract.vllm_layer import make_moe_config, make_prepare_finalize

    fixed = next(c for c in NVLINK_CLASSES if c.module == MODULE)
    dev = device()
    moe_config = make_moe_config(problem, layout, fixed)
    quant_config = FusedMoEQuantConfig.make()
    prepare_finalize = make_prepare_finalize(cls, problem, layout)
    experts = make_experts_double(moe_config, quant_config)
    kernel = FusedMoEKernel(prepare_finalize, experts)
    quant_method = make_quant_method(moe_config, kernel, quant_config)
    runner = moe_runner.MoERunner(
        layer_name=LAYER_NAME,
        moe_config=moe_config,
        router=TopKRouterDouble(problem.top_k),
        routed_input_transform=None,
        gate=None,
        shared_experts=None,
        quant_method=quant_method,
        enable_dbo=False,
    )
    weights = make_weights(problem)
    per_rank = problem.num_experts // layout.ep_size
    local = slice(rank * per_rank, (rank + 1) * per_rank)
    expert_map = torch.full((problem.num_experts,), -1, dtype=torch.int32)
    expert_map[local] = torch.arange(per_rank, dtype=torch.int32)
    layer = LayerDouble(
        runner,
        weights.w13[local].to(dev, torch.bfloat16),
        weights.w2[local].to(dev, torch.bfloat16),
        problem.num_experts,
        expert_map.to(dev),
    )
    tokens = make_tokens(problem)[layout.dp_rank(rank)]
    if entry == "direct":
        # vLLM's custom op body, called without the op (what it resolves the layer to and calls).
        runner._forward_entry = lambda h, r, s, i, name: runner._forward_impl(layer, h, r, s, i)
    calls: dict[str, int] = {"all_reduce": 0}
    real_all_reduce = moe_runner.tensor_model_parallel_all_reduce

    def counted_all_reduce(tensor: torch.Tensor) -> torch.Tensor:
        calls["all_reduce"] += 1
        return real_all_reduce(tensor)

    moe_runner.tensor_model_parallel_all_reduce = counted_all_reduce
    try:
        with forward_context(layer, problem.tokens_per_dp_rank):
            out = runner.forward(
                tokens.hidden_states.to(dev, torch.bfloat16), tokens.router_logits.to(dev, torch.float32)
            )
        torch.cuda.synchronize()
    finally:
        moe_runner.tensor_model_parallel_all_reduce = real_all_reduce
    facts = {
        "fused_output_is_reduced": bool(runner._fused_output_is_reduced),
        "tp_all_reduce_calls": calls["all_reduce"],
        "forward_entry": getattr(runner._forward_entry, "__name__", str(runner._forward_entry)),
        "output_dtype": str(out.dtype),
        "expert_slots": getattr(experts, "slots_seen", {}),
    }
    return out.float().cpu(), facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tp", type=int, default=1, help="TP size; DP = ranks / TP")
    parser.add_argument("--variant", action="append", choices=[PATCHED, PRISTINE])
    parser.add_argument("--entry", choices=["custom_op", "direct"], default="custom_op")
    parser.add_argument(
        "--with-empty-rank", action="store_true", help="also a DP rank with no tokens (vLLM pads those to one)"
    )
    parser.add_argument("--skip-group", action="append", default=[])
    parser.add_argument("--events", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from kernel_contract import Events, call_recorder, loaded_flashinfer_libraries

    stubbed = stub_compiled_ops()
    from moe_contract.layout import ParallelLayout
    from moe_contract.problem import MoEProblem, make_tokens, make_weights
    from moe_contract.reference import dense_reference

    emit = Events(args.events)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    layout = ParallelLayout(world_size=world, tp_size=args.tp)
    if layout.dp_size != 2:
        # vLLM uses the all2all kernels only with DP > 1; the token patterns are the CPU suite's, for DP 2.
        raise SystemExit(f"{layout.name}: this run needs DP 2 (ranks = 2 x TP), not DP {layout.dp_size}")
    tokens = [(1, 6), (7, 3), *([(0, 5)] if args.with_empty_rank else [])]
    problems = [
        MoEProblem(seed, "bfloat16", top_k, False, tok, num_experts=16, hidden=256, intermediate=128)
        for seed, tok in enumerate(tokens)
        for top_k in (1, 2, 8)
    ]
    variants = [v for v in (args.variant or [PATCHED, PRISTINE]) if v not in args.skip_group]
    emit(
        event="plan",
        cases=[
            {"id": f"{v}/{p.case_id}", "group": v, "label": f"{layout.name} {v} {p.case_id}"}
            for v in variants
            for p in problems
        ],
    )
    emit(event="setup", group="", what="vLLM groups over gloo, FlashInfer's two-sided manager")
    communicator = init_groups(layout, rank)
    from vllm.v1.worker.workspace import init_workspace_manager

    init_workspace_manager(device())
    recorder = call_recorder()
    failed = 0
    for variant in variants:
        emit(event="setup", group=variant, what=f"load {variant} {MODULE}.py")
        cls = load_class(variant)
        emit(event="group", group=variant, can_run=True, reason="")
        before = recorder.snapshot()
        libs_before = set(loaded_flashinfer_libraries())
        for problem in problems:
            cid = f"{variant}/{problem.case_id}"
            emit(event="start", case=cid)
            started = time.time()
            try:
                out, facts = run_block(cls, problem, layout, rank, args.entry)
                ref = dense_reference(problem, make_weights(problem), make_tokens(problem)[layout.dp_rank(rank)])
                expected_factor = 1 if variant == PATCHED else layout.tp_size
                errors = {}
                for name, factor in (("vs_reference", 1), ("vs_tp_times_reference", layout.tp_size)):
                    want = factor * ref.routed
                    scale = want.norm(dim=1).clamp_min(1e-12)
                    errors[name] = float(((out - want).norm(dim=1) / scale).max()) if out.shape[0] else 0.0
                key = "vs_reference" if expected_factor == 1 else "vs_tp_times_reference"
                result: dict[str, Any] = {
                    "passed": errors[key] <= RELATIVE_TOLERANCE and tuple(out.shape) == tuple(ref.routed.shape),
                    "expected": "dense reference" if expected_factor == 1 else f"{layout.tp_size} x dense reference",
                    "relative_error": errors,
                    "tokens": out.shape[0],
                    **facts,
                }
            except Exception as exc:
                import traceback

                result = {"passed": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            result.update(started_at=started, ended_at=time.time(), wall_s=round(time.time() - started, 4))
            failed += not result["passed"]
            emit(event="result", case=cid, **result)
            print(json.dumps({"case": cid, **{k: v for k, v in result.items() if k != "traceback"}}), flush=True)
        emit(
            event="evidence",
            group=variant,
            prepare_finalize_file=str(variant_file(variant)),
            file_sha256=sha256(variant_file(variant)),
            entry_points_called=recorder.since(before),
            jit_modules_loaded=sorted(set(loaded_flashinfer_libraries()) - libs_before),
            tp_device_communicator=communicator,
            stubbed_modules=stubbed,
            layout=layout.name,
        )
    dist.barrier()
    emit(event="done")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
