"""Real vLLM objects for one MoE layer on one rank: process groups, config, kernel, runner.

Everything here is the installed vLLM release's code except these seams, each because
the real thing needs a GPU or a full engine config:
- the TP/DP/EP GroupCoordinators are built with vLLM's own `init_model_parallel_group`
  instead of `initialize_model_parallel`, which needs a VllmConfig (and with it the
  engine's serving dependencies);
- the EP group's all2all manager is `FlashInferAll2AllManagerDouble`, because the real
  one allocates MNNVL workspaces on the GPU;
- the runner's custom-op entry (vLLM's `moe_forward`, which would run the modular
  kernel's CUDA prepare/experts/finalize; `FusedMoE.forward_impl` where the layer itself
  decides, before the runner existed) is the harness's CPU MoE layer;
- where a release's runner allocates its DP-chunking staging buffers on the current
  accelerator at construction, they are allocated on the CPU (nothing reads them: they
  feed only the custom op the CPU layer replaces).

Which runner decides the final TP all-reduce differs between releases; `reduce_site()`
picks the adapter by what the installed vLLM has (see `ReduceSite`), never by version.

Longer than 500 lines on purpose: every seam against the installed release is listed above and kept
in this one module, so a reviewer sees all that is not vLLM's own code in one place.
"""

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

import torch

from .layout import ParallelLayout
from .paths import FixedClass
from .problem import MoEProblem


class FlashInferAll2AllManagerDouble:
    """Test double for vLLM's FlashInfer all2all manager (GPU MNNVL workspaces)."""

    def __init__(self) -> None:
        self.initialize_kwargs: dict[str, int] | None = None

    def initialize(self, **kwargs: int) -> None:
        self.initialize_kwargs = kwargs


@dataclass(frozen=True)
class ParallelConfigStandIn:
    """The fields of vllm.config.ParallelConfig that FusedMoEParallelConfig.make reads (v0.16.0
    also reads use_sequence_parallel_moe, where later releases take sp_size_)."""

    all2all_backend: str
    enable_expert_parallel: bool = True
    enable_eplb: bool = False
    use_sequence_parallel_moe: bool = False


@dataclass(frozen=True)
class _OneEngineParallelConfig:
    nnodes: int = 1
    nnodes_within_dp: int = 1
    data_parallel_size: int = 1
    all2all_backend: str = "naive"  # read next to data_parallel_size, used only when it is > 1
    distributed_executor_backend: str | None = None  # ParallelConfig's default


@dataclass(frozen=True)
class VllmConfigStandIn:
    """Stand-in for the engine's VllmConfig where the process groups ask for it.

    v0.11.x-v0.13.0 call `get_current_vllm_config()` in init_distributed_environment and in
    DeviceCommunicatorBase's constructor; with no config set it builds a default VllmConfig,
    which fails without an accelerator (it cannot infer the device). Those two read only
    parallel_config.nnodes, .nnodes_within_dp, .data_parallel_size, .all2all_backend and
    .distributed_executor_backend, to re-rank an engine that runs several DP replicas or nodes
    itself and to make its all2all manager. The harness builds its DP groups directly and sets the manager itself (a
    double), so one node and one engine-level DP replica are the true values for it. Later
    releases call `get_current_vllm_config_or_none()`, get None, and take the same branch.
    """

    parallel_config: _OneEngineParallelConfig = _OneEngineParallelConfig()


def init_process_groups(layout: ParallelLayout, rank: int, init_method: str) -> None:
    from unittest import mock

    import vllm.config
    from vllm.distributed import parallel_state as ps

    stand_in: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if not hasattr(vllm.config, "get_current_vllm_config_or_none"):  # found by what the release has
        stand_in = mock.patch.object(vllm.config, "get_current_vllm_config", VllmConfigStandIn)
    with stand_in:
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


def _accepted(function: Callable[..., object], values: dict[str, object]) -> dict[str, object]:
    """The arguments of `values` that `function` takes: releases add and drop parameters
    (sp_size_, pcp_size_, ...), and each gets the ones it has."""
    parameters = inspect.signature(function).parameters
    return {name: value for name, value in values.items() if name in parameters}


def make_moe_config(problem: MoEProblem, layout: ParallelLayout, fixed: FixedClass) -> Any:  # FusedMoEConfig
    from vllm.model_executor.layers.fused_moe import config

    parallel = config.FusedMoEParallelConfig.make(
        **_accepted(
            config.FusedMoEParallelConfig.make,
            {
                "tp_size_": layout.tp_size,
                "pcp_size_": 1,
                "dp_size_": layout.dp_size,
                "sp_size_": 1,
                "vllm_parallel_config": ParallelConfigStandIn(all2all_backend=fixed.backend),
            },
        )
    )
    if not getattr(parallel, fixed.kernels_flag):
        raise ValueError(f"vLLM would not use {fixed.backend} for layout {layout.name} ({fixed.kernels_flag})")
    try:  # the activation became an enum (fused_moe/activation.py); before, FusedMoEConfig took its name
        from vllm.model_executor.layers.fused_moe.activation import MoEActivation

        activation: object = MoEActivation.SILU
    except ImportError:
        activation = "silu"
    values = {
        "num_experts": problem.num_experts,
        "experts_per_token": problem.top_k,
        "hidden_dim": problem.hidden,
        "intermediate_size_per_partition": problem.intermediate,
        "num_local_experts": problem.num_experts // parallel.ep_size,
        "num_logical_experts": problem.num_experts,
        "activation": activation,
        "device": "cpu",
        "routing_method": config.RoutingMethodType.Renormalize,
        "moe_parallel_config": parallel,
        "in_dtype": problem.dtype,
    }
    fields = {field.name for field in dataclasses.fields(config.FusedMoEConfig)}
    return config.FusedMoEConfig(**{name: value for name, value in values.items() if name in fields})


def make_prepare_finalize(cls: Any, problem: MoEProblem, layout: ParallelLayout) -> Any:
    """`cls` built as vLLM's factory builds it for this layout, from the parameters it takes."""
    return cls(
        **_accepted(
            cls.__init__,
            {
                "use_dp": layout.dp_size > 1,  # flashinfer_cutlass: the factory's DP flag
                "max_num_tokens": max(max(problem.tokens_per_dp_rank), 1),
                "top_k": problem.top_k,
                "num_experts": problem.num_experts,
                "hidden_size": problem.hidden,
                "num_dispatchers": layout.ep_size,
            },
        )
    )


# The callers of a release's reduce decision, as `reduce_site()` names them.
RUNNER_PATH = "runner"  # the runner sums shared + routed and all-reduces (MoERunner.forward)
LAYER_PATH = "layer"  # reduce_results=True: SharedFusedMoE.forward around the runner
MODEL_PATH = "model"  # reduce_results=False: the model sums, then the runner's maybe_all_reduce


@dataclass(frozen=True)
class ReduceSite:
    """Where the installed vLLM decides whether the MoE output still needs a TP all-reduce.

    `module`/`function` name the real code (`nested`: a function defined inside it, where
    the decision is a closure); `paths` are the ways models reach it, each of which the
    harness drives. The site is found by what the release has, so a release that moves the
    code fails loudly here instead of testing the wrong thing.
    """

    module: str
    runner_class: str
    function: str
    paths: tuple[str, ...]
    nested: str = ""

    @property
    def file(self) -> str:
        return self.module.replace(".", "/") + ".py"

    @property
    def decision(self) -> str:
        """The qualified name of the decision, as the code object of a call spells it."""
        name = f"{self.runner_class}.{self.function}"
        return f"{name}.<locals>.{self.nested}" if self.nested else name

    def present(self, owner: type) -> bool:
        function = getattr(owner, self.function, None)
        if not callable(function):
            return False
        if not self.nested:
            return True
        code = getattr(function, "__code__", None)
        return any(getattr(const, "co_name", None) == self.nested for const in (code.co_consts if code else ()))


RUNNER_PACKAGE = "vllm.model_executor.layers.fused_moe.runner"
# Newest layout first: one MoERunner that adds the shared output and reduces once.
REDUCE_SITES = (
    ReduceSite(f"{RUNNER_PACKAGE}.moe_runner", "MoERunner", "_maybe_reduce_final_output", (RUNNER_PATH,)),
    # DefaultMoERunner returns (shared, routed); the layer (SharedFusedMoE) or the model
    # (e.g. nemotron_h, deepseek_v2) finishes the job, each through the runner's
    # maybe_all_reduce_tensor_model_parallel.
    ReduceSite(
        f"{RUNNER_PACKAGE}.default_moe_runner", "DefaultMoERunner", "_maybe_reduce_output", (LAYER_PATH, MODEL_PATH)
    ),
    # v0.17.x-v0.18.x: the same runner, its decision still named _reduce_output (called at
    # the end of DefaultMoERunner.forward rather than around the custom op's DP chunking).
    ReduceSite(f"{RUNNER_PACKAGE}.default_moe_runner", "DefaultMoERunner", "_reduce_output", (LAYER_PATH, MODEL_PATH)),
    # v0.16.0 and older: no runner; FusedMoE.forward_native decides in its closure
    # reduce_output, through FusedMoE.maybe_all_reduce_tensor_model_parallel, on the same
    # two paths (SharedFusedMoE.forward around it, or the model's own call).
    ReduceSite(
        "vllm.model_executor.layers.fused_moe.layer",
        "FusedMoE",
        "forward_native",
        (LAYER_PATH, MODEL_PATH),
        nested="reduce_output",
    ),
)


class UnknownReduceSite(RuntimeError):
    """The installed vLLM has none of the reduce decisions the harness knows how to drive."""


def reduce_site() -> ReduceSite:
    import importlib
    import importlib.util

    for site in REDUCE_SITES:
        try:
            if importlib.util.find_spec(site.module) is None:
                continue
        except ModuleNotFoundError:  # its package (runner/) is not in this release
            continue
        owner = getattr(importlib.import_module(site.module), site.runner_class, None)
        if isinstance(owner, type) and site.present(owner):
            return site
    known = ", ".join(f"{s.decision} in {s.file}" for s in REDUCE_SITES)
    raise UnknownReduceSite(f"the installed vLLM has none of: {known}; teach moe_contract/vllm_layer.py its runner")


# Where a release keeps TritonExperts (moved out of fused_moe.py into experts/ in a later release).
TRITON_EXPERTS_MODULES = (
    "vllm.model_executor.layers.fused_moe.experts.triton_moe",
    "vllm.model_executor.layers.fused_moe.fused_moe",
)


def triton_experts_class() -> type:
    import importlib
    import importlib.util

    for name in TRITON_EXPERTS_MODULES:
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # its package (experts/) is not in this release
            continue
        if spec is not None:
            found = getattr(importlib.import_module(name), "TritonExperts", None)
            if isinstance(found, type):
                return found
    raise ImportError(f"TritonExperts is in none of {', '.join(TRITON_EXPERTS_MODULES)}")


def make_quant_method(moe_config: Any, prepare_finalize: Any) -> Any:  # FusedMoEMethodBase
    """A quant method that only owns a real modular kernel around `prepare_finalize`.

    The experts object only has to exist: the kernel wants a modular experts class next to
    the prepare/finalize, but the CUDA kernels it would launch are replaced by the CPU
    layer. Releases with `FusedMoEKernel` keep it on the quant method (`moe_kernel`);
    before it, `FusedMoEModularKernel` sits in vLLM's own `FusedMoEModularMethod` (`moe_mk`),
    which is what FusedMoE.must_reduce_shared_expert_outputs asks for by type.
    """
    from vllm.model_executor.layers.fused_moe import modular_kernel
    from vllm.model_executor.layers.fused_moe.config import FusedMoEQuantConfig
    from vllm.model_executor.layers.fused_moe.fused_moe_method_base import FusedMoEMethodBase

    quant_config = FusedMoEQuantConfig.make()

    class UnquantizedKernelHolder(FusedMoEMethodBase):
        """The quant method's only job on this path is to own the modular kernel."""

        def create_weights(self, *args: object, **kwargs: object) -> None:
            raise NotImplementedError("weights live in the harness")

        def get_fused_moe_quant_config(self, layer: torch.nn.Module) -> FusedMoEQuantConfig:
            return quant_config

        def apply(self, *args: object, **kwargs: object) -> torch.Tensor:
            raise NotImplementedError("the harness runs the experts")

    experts_class: Any = triton_experts_class()
    experts = experts_class(
        **_accepted(experts_class.__init__, {"moe_config": moe_config, "quant_config": quant_config})
    )
    quant_method = UnquantizedKernelHolder(moe_config)
    if hasattr(modular_kernel, "FusedMoEKernel"):
        quant_method.moe_kernel = modular_kernel.FusedMoEKernel(prepare_finalize, experts)
        return quant_method
    from unittest import mock

    from vllm.model_executor.custom_op import CustomOp
    from vllm.model_executor.layers.fused_moe.fused_moe_modular_method import FusedMoEModularMethod

    quant_method.moe_quant_config = quant_config
    kernel = modular_kernel.FusedMoEModularKernel(
        prepare_finalize,
        experts,
        None,
        **_accepted(
            modular_kernel.FusedMoEModularKernel.__init__, {"moe_parallel_config": moe_config.moe_parallel_config}
        ),
    )
    # Seam: FusedMoEModularMethod is a CustomOp, whose constructor picks a forward method from
    # the engine's compilation config (a VllmConfig the harness does not build). The quant
    # method's forward never runs here (the CPU layer stands in for it); the rest of its
    # constructor is vLLM's own, so the kernel lands in the attribute that release reads.
    with mock.patch.object(CustomOp, "dispatch_forward", lambda self, *args, **kwargs: None):
        return FusedMoEModularMethod(quant_method, kernel)


LAYER_NAME = "model.layers.0.mlp.experts"
Output: TypeAlias = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class RunnerFacts:
    """What the real runner reports about its own reduce decision."""

    fused_output_is_reduced: bool
    dp_chunking: bool  # the runner skips its final reduce for DP-chunked backends
    # The shared experts run inside the MoE op (use_overlapped), so the op's final reduce
    # covers their output too; otherwise SharedFusedMoE.forward runs them and reduces them
    # early only when output_is_reduced().
    shared_in_op: bool = True


class MoEBlock:
    """One MoE block on one rank, reached through `path`: hidden states in, block output out."""

    def __init__(
        self,
        site: ReduceSite,
        path: str,
        moe_config: Any,
        prepare_finalize: Any,
        shared_experts: torch.nn.Module | None,
        forward_entry: Callable[..., Output],
        overlap: bool,
    ) -> None:
        if path not in site.paths:
            raise ValueError(f"{site.runner_class} is not reached through the {path!r} path")
        self.site, self.path = site, path
        self.layer: Any = None  # the layer, where the release's runner is one (FusedMoE, SharedFusedMoE)
        quant_method = make_quant_method(moe_config, prepare_finalize)
        use_overlapped = shared_experts is not None and overlap
        if site.runner_class == "MoERunner":
            self.runner, self.layer = _moe_runner(moe_config, quant_method, shared_experts, forward_entry), None
        elif site.runner_class == "FusedMoE":
            self.layer = _deciding_shared_fused_moe(
                moe_config, quant_method, shared_experts, forward_entry, path, use_overlapped
            )
            self.runner = self.layer  # the layer is its own runner here
        else:
            self.layer = _shared_fused_moe(
                moe_config, quant_method, shared_experts, forward_entry, path, use_overlapped
            )
            self.runner = self.layer.runner

    @property
    def facts(self) -> RunnerFacts:
        if self.site.runner_class == "MoERunner":
            return RunnerFacts(bool(self.runner._fused_output_is_reduced), dp_chunking=False)
        return RunnerFacts(
            bool(self.runner.must_reduce_shared_expert_outputs()),
            dp_chunking=bool(self.runner.use_dp_chunking),
            shared_in_op=bool(self.layer.use_overlapped),
        )

    def __call__(self, hidden_states: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        if self.layer is None:
            return self.runner.forward(hidden_states, router_logits)
        with _layer_registered(self.layer):
            shared, routed = self.layer.forward(hidden_states, router_logits)
        total = routed if shared is None else routed + shared
        if self.path == MODEL_PATH:
            from vllm.distributed import get_tensor_model_parallel_world_size

            # What nemotron_h / deepseek_v2 / qwen3_moe do with a reduce_results=False
            # layer: add the shared output, then, with the model's TP size (not the MoE
            # layer's, which EP makes 1), ask the runner whether to all-reduce.
            if get_tensor_model_parallel_world_size() > 1:
                total = self.layer.maybe_all_reduce_tensor_model_parallel(total)
        return total


@contextlib.contextmanager
def _layer_registered(layer: torch.nn.Module) -> Iterator[None]:
    """A forward context in which vLLM's moe_forward custom op finds `layer` by its name.

    Where the layer decides the reduce (no runner), FusedMoE.forward_native reaches the
    experts through the real custom op unless vLLM's platform is the CPU one (a CPU-only
    install of a CUDA wheel is the "unspecified" platform), and the op's body looks the
    layer up in the forward context, as the model runner registers it. Only that lookup
    needs a context; the DP metadata stays unset (the CPU layer does not read it).
    """
    from vllm import forward_context

    values = {"no_compile_layers": {LAYER_NAME: layer}, "attn_metadata": {}, "slot_mapping": {}, "virtual_engine": 0}
    fields = {field.name for field in dataclasses.fields(forward_context.ForwardContext)}
    context = forward_context.ForwardContext(**{name: value for name, value in values.items() if name in fields})
    with forward_context.override_forward_context(context):
        yield


def _moe_runner(moe_config: Any, quant_method: Any, shared_experts: Any, forward_entry: Any) -> Any:  # MoERunner
    from vllm.model_executor.layers.fused_moe.runner.moe_runner import MoERunner

    runner = MoERunner(
        layer_name=LAYER_NAME,
        moe_config=moe_config,
        router=None,  # routing happens in forward_entry
        routed_input_transform=None,
        gate=None,
        shared_experts=shared_experts,
        quant_method=quant_method,
        enable_dbo=False,
    )
    runner._forward_entry = forward_entry
    return runner


class _LayerName(torch.nn.Module):
    """DefaultMoERunner reads only `layer.layer_name` from the layer it is built for."""

    def __init__(self) -> None:
        super().__init__()
        self.layer_name = LAYER_NAME


def _shared_fused_moe(
    moe_config: Any, quant_method: Any, shared_experts: Any, forward_entry: Any, path: str, use_overlapped: bool
) -> Any:
    """A real SharedFusedMoE whose runner is a real DefaultMoERunner, without FusedMoE.__init__.

    FusedMoE.__init__ needs a VllmConfig and creates weights on the device; the forward
    path reads only the attributes set here, with the values FusedMoE.__init__ and
    _init_runner would give them (layer.py).
    """
    from unittest import mock

    from vllm.model_executor.layers.fused_moe.runner.default_moe_runner import DefaultMoERunner
    from vllm.model_executor.layers.fused_moe.shared_fused_moe import SharedFusedMoE

    reduce_results = path == LAYER_PATH
    # Seam: DP-chunking staging buffers go to the CPU (the module docstring says why).
    with mock.patch.object(torch.accelerator, "current_device_index", return_value="cpu"):
        runner = DefaultMoERunner(
            layer=_LayerName(),
            moe_config=moe_config,
            router=None,  # routing happens in forward_entry
            routed_input_transform=None,
            gate=None,
            shared_experts=shared_experts if use_overlapped else None,
            quant_method=quant_method,
            reduce_results=reduce_results,
            enable_dbo=False,
        )
    runner.moe_forward = forward_entry
    layer = SharedFusedMoE.__new__(SharedFusedMoE)
    torch.nn.Module.__init__(layer)
    layer.runner = runner
    layer.reduce_results = reduce_results
    layer.use_overlapped = use_overlapped
    layer._shared_experts = shared_experts
    layer._forward_method = layer.forward_native  # CustomOp.forward dispatches here on CPU
    return layer


def _deciding_shared_fused_moe(
    moe_config: Any, quant_method: Any, shared_experts: Any, forward_entry: Any, path: str, use_overlapped: bool
) -> Any:  # SharedFusedMoE
    """A real SharedFusedMoE of a release without a runner, without FusedMoE.__init__.

    There the layer decides itself: FusedMoE.forward_native's closure reduce_output calls
    FusedMoE.maybe_all_reduce_tensor_model_parallel, which asks
    must_reduce_shared_expert_outputs (the quant method's modular kernel). FusedMoE.__init__
    needs a VllmConfig and creates weights on the device, so the smallest real piece is the
    object made with __new__ and the attributes forward_native, SharedFusedMoE.forward and
    those methods read, with the values FusedMoE.__init__ gives them (layer.py). The seam is
    `forward_impl`, which forward_native calls on CPU where a GPU build calls the
    moe_forward custom op (whose body is forward_impl too).
    """
    from vllm.model_executor.layers.fused_moe.shared_fused_moe import SharedFusedMoE

    reduce_results = path == LAYER_PATH
    layer = SharedFusedMoE.__new__(SharedFusedMoE)
    torch.nn.Module.__init__(layer)
    layer.moe_config = moe_config
    layer.moe_parallel_config = moe_config.moe_parallel_config
    layer.quant_method = quant_method
    layer.reduce_results = reduce_results
    layer.use_overlapped = use_overlapped
    layer._shared_experts = shared_experts
    layer._gate = None
    layer._routed_input_transform = None
    layer._shared_experts_input = None
    layer.hidden_size = moe_config.hidden_dim
    layer.is_sequence_parallel = False
    layer.layer_name = LAYER_NAME
    layer.zero_expert_num = 0  # FusedMoE.__init__'s default; v0.11.x's forward_native reads it

    def forward_impl(hidden_states: torch.Tensor, router_logits: torch.Tensor) -> Output:
        # forward_native hands the shared experts' input over in an attribute (latent MoE).
        shared_input = getattr(layer, "_shared_experts_input", None)
        if layer.shared_experts is None:
            return forward_entry(hidden_states, router_logits, None)
        return forward_entry(hidden_states, router_logits, hidden_states if shared_input is None else shared_input)

    layer.forward_impl = forward_impl
    layer._forward_method = layer.forward_native  # CustomOp.forward dispatches here on CPU
    return layer
