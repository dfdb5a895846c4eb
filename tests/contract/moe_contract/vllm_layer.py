"""Real vLLM objects for one MoE layer on one rank: process groups, config, kernel, runner.

Everything here is vLLM v0.20.0 code except three seams, each because the real thing
needs a GPU or a full engine config:
- the TP/DP/EP GroupCoordinators are built with vLLM's own `init_model_parallel_group`
  instead of `initialize_model_parallel`, which needs a VllmConfig (and with it the
  engine's serving dependencies);
- the EP group's all2all manager is `FlashInferAll2AllManagerDouble`, because the real
  one allocates MNNVL workspaces on the GPU;
- `MoERunner._forward_entry` (vLLM's `moe_forward` custom op, which would run the
  modular kernel's CUDA prepare/experts/finalize) is the harness's CPU MoE layer.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .layout import ParallelLayout
from .problem import MoEProblem

TWO_SIDED_BACKEND = "flashinfer_nvlink_two_sided"
ONE_SIDED_BACKEND = "flashinfer_nvlink_one_sided"
BACKEND_OF_MODULE = {
    "flashinfer_nvlink_two_sided": TWO_SIDED_BACKEND,
    "flashinfer_nvlink_one_sided": ONE_SIDED_BACKEND,
}


class FlashInferAll2AllManagerDouble:
    """Test double for vLLM's FlashInfer all2all manager (GPU MNNVL workspaces)."""

    def __init__(self) -> None:
        self.initialize_kwargs: dict[str, int] | None = None

    def initialize(self, **kwargs: int) -> None:
        self.initialize_kwargs = kwargs


@dataclass(frozen=True)
class ParallelConfigStandIn:
    """The three fields of vllm.config.ParallelConfig that FusedMoEParallelConfig.make reads."""

    all2all_backend: str
    enable_expert_parallel: bool = True
    enable_eplb: bool = False


def init_process_groups(layout: ParallelLayout, rank: int, init_method: str) -> None:
    from vllm.distributed import parallel_state as ps

    ps.init_distributed_environment(layout.world_size, rank, init_method, rank, backend="gloo")
    ps._TP = ps.init_model_parallel_group(layout.tp_groups(), rank, "gloo", group_name="tp")
    ps._DP = ps.init_model_parallel_group(layout.dp_groups(), rank, "gloo", group_name="dp")
    ps._EP = ps.init_model_parallel_group([list(range(layout.world_size))], rank, "gloo", group_name="ep")
    communicator = ps.get_ep_group().device_communicator
    if communicator is None:
        raise RuntimeError("vLLM created no device communicator for the EP group")
    communicator.all2all_manager = FlashInferAll2AllManagerDouble()


def destroy_process_groups() -> None:
    from vllm.distributed import parallel_state as ps

    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()


def make_moe_config(problem: MoEProblem, layout: ParallelLayout, backend: str):  # -> FusedMoEConfig
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import (
        FusedMoEConfig,
        FusedMoEParallelConfig,
        RoutingMethodType,
    )

    parallel = FusedMoEParallelConfig.make(
        tp_size_=layout.tp_size,
        pcp_size_=1,
        dp_size_=layout.dp_size,
        sp_size_=1,
        vllm_parallel_config=ParallelConfigStandIn(all2all_backend=backend),  # type: ignore[arg-type]
    )
    uses_backend = {
        TWO_SIDED_BACKEND: parallel.use_fi_nvl_two_sided_kernels,
        ONE_SIDED_BACKEND: parallel.use_fi_nvl_one_sided_kernels,
    }[backend]
    if not uses_backend:
        raise ValueError(f"vLLM would not use {backend} for layout {layout.name}")
    return FusedMoEConfig(
        num_experts=problem.num_experts,
        experts_per_token=problem.top_k,
        hidden_dim=problem.hidden,
        intermediate_size_per_partition=problem.intermediate,
        num_local_experts=problem.num_experts // parallel.ep_size,
        num_logical_experts=problem.num_experts,
        activation=MoEActivation.SILU,
        device="cpu",
        routing_method=RoutingMethodType.Renormalize,
        moe_parallel_config=parallel,
        in_dtype=problem.dtype,
    )


def make_prepare_finalize(cls: type, backend: str, problem: MoEProblem, layout: ParallelLayout):
    if backend == ONE_SIDED_BACKEND:
        return cls(
            max_num_tokens=max(max(problem.tokens_per_dp_rank), 1),
            top_k=problem.top_k,
            num_experts=problem.num_experts,
            hidden_size=problem.hidden,
            num_dispatchers=layout.ep_size,
        )
    return cls(num_dispatchers=layout.ep_size)


def make_runner(
    moe_config,
    prepare_finalize,
    shared_experts: torch.nn.Module | None,
    forward_entry: Callable[..., torch.Tensor | tuple[torch.Tensor, torch.Tensor]],
):  # -> MoERunner
    """A real MoERunner whose modular kernel holds `prepare_finalize`.

    The experts object only has to exist: FusedMoEKernel wants a modular experts class
    next to the prepare/finalize, but the CUDA kernels it would launch are replaced by
    `forward_entry`.
    """
    from vllm.model_executor.layers.fused_moe.config import FusedMoEQuantConfig
    from vllm.model_executor.layers.fused_moe.fused_moe import TritonExperts
    from vllm.model_executor.layers.fused_moe.fused_moe_method_base import FusedMoEMethodBase
    from vllm.model_executor.layers.fused_moe.modular_kernel import FusedMoEKernel
    from vllm.model_executor.layers.fused_moe.runner.moe_runner import MoERunner

    quant_config = FusedMoEQuantConfig.make()

    class UnquantizedKernelHolder(FusedMoEMethodBase):
        """The quant method's only job on this path is to own the modular kernel."""

        def create_weights(self, *args: object, **kwargs: object) -> None:
            raise NotImplementedError("weights live in the harness")

        def get_fused_moe_quant_config(self, layer: torch.nn.Module) -> FusedMoEQuantConfig:
            return quant_config

        def apply(self, *args: object, **kwargs: object) -> torch.Tensor:
            raise NotImplementedError("the harness runs the experts")

    quant_method = UnquantizedKernelHolder(moe_config)
    quant_method.moe_kernel = FusedMoEKernel(prepare_finalize, TritonExperts(moe_config, quant_config))
    runner = MoERunner(
        layer_name="model.layers.0.mlp.experts",
        moe_config=moe_config,
        router=None,  # type: ignore[arg-type]  # routing happens in forward_entry
        routed_input_transform=None,
        gate=None,
        shared_experts=shared_experts,
        quant_method=quant_method,
        enable_dbo=False,
    )
    runner._forward_entry = forward_entry
    return runner
