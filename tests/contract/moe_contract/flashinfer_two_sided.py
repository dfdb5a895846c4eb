"""Run the installed FlashInfer's two-sided combine on CPU, with only device and transport doubled.

In flashinfer-python 0.6.8.post1 `MnnvlMoe.mnnvl_moe_alltoallv_combine` is Python: it
allocates a [token_count * top_k, hidden] buffer on `cuda`, lets the `moe_comm` CUDA
kernel write each (token, k) slot over NVLink, and ends in
`torch.sum(buffer.reshape(token_count, top_k, hidden), dim=1)` -- the top-k sum that
vLLM's `output_is_reduced() == True` relies on.

Importing `flashinfer.comm` needs its CUDA JIT stack (tvm_ffi, nvidia libraries), which a
CPU test environment does not have. So we read the function out of the installed
source file with `ast`, compile it under its real file name, and execute it with two
globals replaced by doubles: `torch` (only `torch.device("cuda")` is redirected to CPU)
and `moe_comm` (the NVLink kernel). If FlashInfer changes the function so that it needs
any other global, or the function disappears, loading fails with `FlashInferCombineDrift`.
"""

import ast
import builtins
import importlib.metadata
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from .transport import counts_from_cumsum, exchange_rows

COMBINE_CLASS = "MnnvlMoe"
COMBINE_FUNCTION = "mnnvl_moe_alltoallv_combine"
COMBINE_MODULE = Path("comm") / "trtllm_alltoall.py"
# Globals the verified version reads; anything new needs a fresh look at the code.
EXPECTED_GLOBALS = frozenset({"torch", "moe_comm"})


class FlashInferCombineDrift(RuntimeError):
    """The installed FlashInfer's combine no longer looks like the version we verified."""


def installed_flashinfer_version() -> str:
    return importlib.metadata.version("flashinfer-python")


def flashinfer_package_dir() -> Path:
    # find_spec on the top-level name locates the package without executing it.
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        raise FlashInferCombineDrift("flashinfer-python is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations)))


def combine_source_file() -> Path:
    return flashinfer_package_dir() / COMBINE_MODULE


def find_combine_function(tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == COMBINE_CLASS:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == COMBINE_FUNCTION:
                    return item
    raise FlashInferCombineDrift(f"{COMBINE_CLASS}.{COMBINE_FUNCTION} not found in {COMBINE_MODULE}")


def global_names_read(function: ast.FunctionDef) -> set[str]:
    params = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
    assigned = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {
        n.id
        for stmt in function.body
        for n in ast.walk(stmt)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    return loaded - params - assigned - set(dir(builtins))


def _strip_annotations_and_decorators(function: ast.FunctionDef) -> ast.FunctionDef:
    # Annotations name FlashInfer types (MoEAlltoallInfo) that need the CUDA import chain;
    # they do not change behaviour, so the executed copy goes without them.
    function.decorator_list = []
    function.returns = None
    for arg in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
        arg.annotation = None
    return function


class CpuDeviceTorchDouble:
    """Test double for the `torch` global of FlashInfer's module: `torch.device("cuda")` -> CPU."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def device(spec: str | torch.device = "cpu", *args: Any) -> torch.device:
        return torch.device("cpu")


class MoeCommTransportDouble:
    """Test double for FlashInfer's `moe_comm` NVLink kernel (combine direction).

    Sends x[recv_rank_local_indices] back, rank by rank as `recv_rank_count_cumsum`
    says, and writes what arrives into `output[backward_recv_rank_local_indices]`, the
    (token * top_k + k) slots. With `group=None` it is a loopback for one process.
    """

    def __init__(self, group: dist.ProcessGroup | None) -> None:
        self.group = group
        self.calls = 0

    def __call__(
        self,
        x: torch.Tensor,
        recv_rank_count_cumsum: torch.Tensor,
        recv_rank_local_indices: torch.Tensor,
        output: torch.Tensor,
        send_rank_count_cumsum: torch.Tensor,
        backward_recv_rank_local_indices: torch.Tensor,
        workspace: object,
        ep_rank: int,
        ep_size: int,
    ) -> None:
        self.calls += 1
        received = exchange_rows(
            x[recv_rank_local_indices],
            counts_from_cumsum(recv_rank_count_cumsum),
            counts_from_cumsum(send_rank_count_cumsum),
            self.group,
        )
        output[backward_recv_rank_local_indices] = received


def load_two_sided_combine(moe_comm: Callable[..., None]) -> Callable[..., torch.Tensor]:
    """The installed `MnnvlMoe.mnnvl_moe_alltoallv_combine`, executed with CPU doubles."""
    path = combine_source_file()
    function = find_combine_function(ast.parse(path.read_text(), filename=str(path)))
    unexpected = global_names_read(function) - EXPECTED_GLOBALS
    if unexpected:
        raise FlashInferCombineDrift(
            f"{COMBINE_FUNCTION} now reads {sorted(unexpected)}; re-verify the top-k reduction"
        )
    module = ast.Module(body=[_strip_annotations_and_decorators(function)], type_ignores=[])
    namespace: dict[str, Any] = {
        "__builtins__": builtins,
        "torch": CpuDeviceTorchDouble(),
        "moe_comm": moe_comm,
    }
    exec(compile(module, str(path), "exec"), namespace)
    return namespace[COMBINE_FUNCTION]
