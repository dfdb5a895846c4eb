"""Drive FlashInfer's real NVLink MoE dispatch/combine with known expert outputs.

Patch 0001 makes vLLM's flashinfer_nvlink_{two,one}_sided say output_is_reduced()
because FlashInfer's combine returns, per token, the sum over its top-k slots.
This module checks exactly that on a GPU: every expert e has a distinct output
pattern f_e(x) = s_e * x + b_e (b_e varies along hidden), the expert stage on
each EP rank sums the weighted outputs of its *local* experts for every received
row (what vLLM's fused experts do), and combine must hand back one row per
original token equal to sum_j w_j * f_{e_j}(x): nothing left to reduce.

The workspaces are built as vLLM 0.20/0.21's all2all managers build them
(Mapping + MnnvlConfig over a torch.distributed group), so a failure to build
them here is the same failure vLLM would hit.

Rank-generic: pytest uses it in-process with one rank; at EP 2/4/8 each rank is a
process: ``python tests/kernel/ep_launcher.py --ep N`` starts them with a deadline per case
(``--events`` is how a rank reports to it), or ``torchrun --nproc-per-node N
tests/kernel/kernel_contract.py --json out.json`` without one.
Needs torch with CUDA and flashinfer-python; import it only after
kernel_probe.environment_reason() returned None.

Longer than 500 lines on purpose: it also runs standalone on a GPU machine (tests/kernel/run_on_device.sh
carries it there) with nothing of this repository beside it.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

if torch.cuda.is_available():
    # flashinfer.comm.cuda_ipc looks for an already loaded libcudart at import.
    torch.cuda.init()

import flashinfer.comm.trtllm_alltoall as two_sided_module
from flashinfer.comm.mapping import Mapping
from flashinfer.comm.mnnvl import CommBackend, MnnvlConfig, MnnvlMemory
from flashinfer.comm.trtllm_alltoall import MnnvlMoe

# The one-sided MoeAlltoAll came later than the two-sided MnnvlMoe (flashinfer-python 0.5.x has only
# the latter, which is all the all2allv backend of vLLM 0.11-0.14 drives), so each backend is probed
# on its own: a missing module makes that backend's tests skip with this reason, not the whole suite.
try:
    import flashinfer.comm.trtllm_moe_alltoall as one_sided_module
    from flashinfer.comm.trtllm_moe_alltoall import (
        MoeAlltoAll,
        moe_a2a_get_workspace_size_per_rank,
    )

    ONE_SIDED_MISSING: str | None = None
except ImportError as _exc:
    one_sided_module = None
    ONE_SIDED_MISSING = (
        f"this flashinfer-python has no one-sided MoeAlltoAll ({type(_exc).__name__}: {_exc}); "
        "the vLLM releases that pin it drive only the two-sided MnnvlMoe"
    )

NUM_EXPERTS = 32  # divisible by every EP size we run (1, 2, 4, 8)
# A barrier after the one-sided workspace's initialize (OneSided says why); main() can turn it off
# to show the hang it prevents.
INIT_BARRIER = True
HIDDEN = 2048
MAX_TOKENS = 4096  # largest token count per rank in the matrix
TOKEN_COUNTS = (1, 7, 128, 4096)
TOP_KS = (1, 2, 8)
TWO_SIDED = "flashinfer_nvlink_two_sided"
ONE_SIDED = "flashinfer_nvlink_one_sided"
BACKENDS = (TWO_SIDED, ONE_SIDED)


class GroupComm(CommBackend):
    """FlashInfer handle-exchange backend over a torch.distributed group.

    The same shape as vLLM's mnnvl_compat.CustomCommunicator, which is what vLLM
    passes to MnnvlConfig, so workspace set-up here matches vLLM's.
    """

    def __init__(self, group: dist.ProcessGroup) -> None:
        self._group = group

    def Get_rank(self) -> int:
        return self._group.rank()

    def Get_size(self) -> int:
        return self._group.size()

    def allgather(self, data: object) -> list[object]:
        out: list[object] = [None] * self.Get_size()
        dist.all_gather_object(out, data, group=self._group)
        return out

    def bcast(self, data: object, root: int) -> object:
        objs = [data]
        dist.broadcast_object_list(objs, src=root, group=self._group)
        return objs[0]

    def barrier(self) -> None:
        dist.barrier(group=self._group)

    def Split(self, color: int, key: int) -> GroupComm:
        return self


@dataclass(frozen=True)
class EpContext:
    rank: int
    world_size: int
    device: torch.device
    group: dist.ProcessGroup

    @property
    def experts_per_rank(self) -> int:
        return NUM_EXPERTS // self.world_size


@functools.cache
def ep_context() -> EpContext:
    """One EP group over all processes: torchrun's, or a private 1-rank group."""
    if not dist.is_initialized():
        if "WORLD_SIZE" in os.environ:
            dist.init_process_group("gloo")
        else:
            # A private store: pytest and the probe need no rendezvous for one rank.
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    group = dist.group.WORLD
    assert group is not None
    return EpContext(dist.get_rank(), dist.get_world_size(), device, group)


def _mnnvl_config(ctx: EpContext) -> MnnvlConfig:
    return MnnvlConfig(comm_backend=GroupComm(ctx.group), fabric_page_size=1 << 29)


def _err(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " | ")
    return text if len(text) <= 400 else text[:397] + "..."


def try_mnnvl_memory(ctx: EpContext) -> str:
    """Allocate, map and free one FlashInfer MNNVL segment: the workspace primitive."""
    try:
        MnnvlMemory.initialize()
        MnnvlMemory.set_comm_from_config(_two_sided_mapping(ctx), _mnnvl_config(ctx))
        mem = MnnvlMemory(_two_sided_mapping(ctx), 1 << 21)
        tensor = mem.as_torch_strided_tensor(torch.uint8)
        tensor[ctx.rank].fill_(7)
        torch.cuda.synchronize()
        ok = bool((tensor[ctx.rank] == 7).all().item())
        shape = tuple(tensor.shape)
        del tensor, mem
        return f"ok (2 MiB segment, tensor {shape}, write/read {'ok' if ok else 'MISMATCH'})"
    except Exception as exc:
        return _err(exc)


def _two_sided_mapping(ctx: EpContext) -> Mapping:
    # vLLM 0.21 FlashInferNVLinkTwoSidedManager.initialize
    return Mapping(ctx.world_size, ctx.rank, torch.cuda.device_count(), tp_size=ctx.world_size)


def _one_sided_mapping(ctx: EpContext) -> Mapping:
    # vLLM 0.21 FlashInferNVLinkOneSidedManager.initialize
    return Mapping(
        ctx.world_size,
        ctx.rank,
        torch.cuda.device_count(),
        tp_size=ctx.world_size,
        moe_ep_size=ctx.world_size,
    )


class TwoSided:
    """MnnvlMoe: prepare, all-to-all-v dispatch, combine (+ torch.sum over top-k)."""

    name = TWO_SIDED

    def __init__(self, ctx: EpContext, top_k: int, hidden: int, max_tokens: int) -> None:
        self.ctx, self.top_k = ctx, top_k
        cfg = _mnnvl_config(ctx)
        mapping = _two_sided_mapping(ctx)
        self.workspace = MnnvlMoe.get_moe_workspaces(mapping, cfg)
        self.prepare_workspace = MnnvlMoe.get_moe_prepare_workspace(mapping, cfg)
        self.info = None

    def dispatch(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, max_tokens_all_ranks: int) -> Any:
        ctx = self.ctx
        self.info, recv_ids, recv_w, _ = MnnvlMoe.mnnvl_moe_alltoallv_prepare_without_allgather(
            ids,
            weights,
            None,
            self.prepare_workspace,
            max_tokens_all_ranks,
            ctx.rank,
            ctx.world_size,
            NUM_EXPERTS,
            NUM_EXPERTS,
            self.top_k,
        )
        recv_x = MnnvlMoe.mnnvl_moe_alltoallv(x, self.info, self.workspace, ctx.rank, ctx.world_size)
        return recv_x, recv_ids, recv_w

    def combine(self, expert_out: torch.Tensor, token_count: int, max_tokens_all_ranks: int) -> torch.Tensor:
        return MnnvlMoe.mnnvl_moe_alltoallv_combine(
            expert_out,
            self.info,
            self.workspace,
            ep_rank=self.ctx.rank,
            ep_size=self.ctx.world_size,
            top_k=self.top_k,
            token_count=token_count,
        )


class OneSided:
    """MoeAlltoAll: dispatch of [x, ids, weights], combine summing in-kernel."""

    name = ONE_SIDED

    def __init__(self, ctx: EpContext, top_k: int, hidden: int, max_tokens: int) -> None:
        self.ctx, self.top_k, self.hidden = ctx, top_k, hidden
        # Sized as vLLM 0.21 FlashInferNVLinkOneSidedManager does for bf16 dispatch.
        size = moe_a2a_get_workspace_size_per_rank(
            ep_size=ctx.world_size,
            max_num_tokens=max_tokens,
            total_dispatch_payload_size_per_token=hidden * 2 + top_k * 4 + top_k * 4,
            combine_payload_size_per_token=hidden * 2,
        )
        self.a2a = MoeAlltoAll(
            mapping=_one_sided_mapping(ctx),
            max_num_tokens=max_tokens,
            top_k=top_k,
            num_experts=NUM_EXPERTS,
            workspace_size_per_rank=size,
            mnnvl_config=_mnnvl_config(ctx),
        )
        if INIT_BARRIER:
            # moe_a2a_initialize zeroes this rank's slice of the workspace, completion flags
            # included, and FlashInfer starts no barrier after it: a peer that dispatches first
            # writes its flag into a slice that is zeroed afterwards, and this rank then waits
            # for that flag until the kernel's ~300 s clock64 timeout traps. Seen at EP 8 on one
            # GPU, where eight time-sliced contexts make the gap long (docs/contract.md). vLLM
            # gets the same ordering from the collectives of model loading; here a barrier after
            # every rank's initialize gives it.
            torch.cuda.synchronize()
            dist.barrier(group=ctx.group)

    def dispatch(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, max_tokens_all_ranks: int) -> Any:
        recv_x, recv_ids, recv_w = self.a2a.dispatch(
            token_selected_experts=ids,
            input_payloads=[x, ids, weights],
            runtime_max_tokens_per_rank=max_tokens_all_ranks,
        )
        h, k = x.shape[-1], ids.shape[-1]
        return recv_x.reshape(-1, h), recv_ids.reshape(-1, k), recv_w.reshape(-1, k)

    def combine(self, expert_out: torch.Tensor, token_count: int, max_tokens_all_ranks: int) -> torch.Tensor:
        payload = expert_out.view(self.ctx.world_size, max_tokens_all_ranks, expert_out.shape[-1])
        return self.a2a.combine(payload=payload, runtime_max_tokens_per_rank=max_tokens_all_ranks)


_BACKEND_CLS: dict[str, type[TwoSided | OneSided]] = {TWO_SIDED: TwoSided, ONE_SIDED: OneSided}


@functools.cache
def backend(name: str, top_k: int, hidden: int = HIDDEN, max_tokens: int = MAX_TOKENS) -> TwoSided | OneSided:
    """One workspace per (backend, top_k, shape): FlashInfer caches them per process anyway."""
    return _BACKEND_CLS[name](ep_context(), top_k, hidden, max_tokens)


def missing(name: str) -> str | None:
    """Why this FlashInfer has no API for the backend at all, or None."""
    return ONE_SIDED_MISSING if name == ONE_SIDED else None


def available_backends() -> tuple[str, ...]:
    return tuple(name for name in BACKENDS if missing(name) is None)


def try_backend(ctx: EpContext, name: str) -> tuple[bool, str]:
    """Build the JIT module and the workspace, then run one token through."""
    why = missing(name)
    if why is not None:
        return False, why
    try:
        case = make_case(ctx, tokens=1, top_k=1)
        result = run_case(name, case)
        return True, f"JIT module + workspace ok; 1-token round trip max|err| {result.max_abs_err:.3g}"
    except Exception as exc:
        return False, _err(exc)


# ---- known inputs and the reference -------------------------------------------------


@functools.cache
def _expert_params(device: torch.device, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    e = torch.arange(NUM_EXPERTS, device=device)
    # Sign and magnitude differ per expert, so swapping or dropping one shows.
    scale = torch.where(e % 2 == 0, 1.0, -1.0) * (1.0 + (e % 4).float() / 4)
    h = torch.arange(hidden, device=device)
    bias = (e[:, None] + 1).float() * ((h[None, :] % 5) + 1).float() / 64
    return scale, bias


def expert_output(expert_ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """f_e(x) = s_e * x + b_e in fp32, one row per (row, expert id)."""
    scale, bias = _expert_params(x.device, x.shape[-1])
    e = expert_ids.long()
    return scale[e][:, None] * x.float() + bias[e]


@dataclass
class Case:
    tokens: int
    top_k: int
    x: torch.Tensor  # [T, H] bf16
    ids: torch.Tensor  # [T, k] int32, distinct experts per token
    weights: torch.Tensor  # [T, k] fp32 router weights
    max_tokens_all_ranks: int


def make_case(ctx: EpContext, tokens: int, top_k: int, hidden: int = HIDDEN, seed: int = 1234) -> Case:
    gen = torch.Generator().manual_seed(seed + 7919 * ctx.rank + 31 * tokens + top_k)
    x = (torch.randn(tokens, hidden, generator=gen) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, NUM_EXPERTS, generator=gen).argsort(dim=1)[:, :top_k].to(torch.int32)
    w = torch.rand(tokens, top_k, generator=gen) + 0.1
    w = w / w.sum(dim=1, keepdim=True)
    dev = ctx.device
    # Every rank sends the same count here; runtime max = that count.
    return Case(tokens, top_k, x.to(dev), ids.to(dev), w.to(dev), tokens)


def reference(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum_j w_j f_{e_j}(x), sum_j |w_j f_{e_j}(x)|) in fp32: value and error scale."""
    total = torch.zeros(case.x.shape, dtype=torch.float32, device=case.x.device)
    magnitude = torch.zeros_like(total)
    for j in range(case.top_k):
        term = case.weights[:, j : j + 1] * expert_output(case.ids[:, j], case.x)
        total += term
        magnitude += term.abs()
    return total, magnitude


def local_expert_stage(
    ctx: EpContext, recv_x: torch.Tensor, recv_ids: torch.Tensor, recv_w: torch.Tensor
) -> torch.Tensor:
    """What vLLM's fused experts hand to finalize: per received row, the weighted
    sum over this rank's experts only (non-local ids are masked, as FlashInfer
    marks them with an out-of-range id)."""
    lo = ctx.rank * ctx.experts_per_rank
    hi = lo + ctx.experts_per_rank
    out = torch.zeros(recv_x.shape, dtype=torch.float32, device=recv_x.device)
    for j in range(recv_ids.shape[1]):
        e = recv_ids[:, j].long()
        local = (e >= lo) & (e < hi)
        term = recv_w[:, j : j + 1].float() * expert_output(e.clamp(lo, hi - 1), recv_x)
        # where(), not a multiply: rows past the received count hold garbage.
        out = torch.where(local[:, None], out + term, out)
    return out.to(recv_x.dtype)


@dataclass
class CaseResult:
    backend: str
    ep_size: int
    rank: int
    tokens: int
    top_k: int
    shape: tuple[int, ...]
    dtype: str
    max_abs_err: float
    max_allowed: float
    worst_ratio: float  # max |err| / allowed; <= 1 passes
    passed: bool


def combine_case(name: str, case: Case, hidden: int = HIDDEN) -> torch.Tensor:
    """Real dispatch -> per-expert patterns on the receiving rank -> real combine."""
    ctx = ep_context()
    be = backend(name, case.top_k, hidden)
    recv = be.dispatch(case.x, case.ids, case.weights, case.max_tokens_all_ranks)
    expert_out = local_expert_stage(ctx, *recv)
    out = be.combine(expert_out, case.tokens, case.max_tokens_all_ranks)
    torch.cuda.synchronize()
    return out


def check_output(name: str, case: Case, out: torch.Tensor) -> CaseResult:
    """Compare a combine output with sum over top-k of w_j f_{e_j}(x), elementwise."""
    ctx = ep_context()
    ref, mag = reference(case)
    shape = tuple(out.shape)
    if shape != tuple(ref.shape):
        # e.g. [T * top_k, H]: combine left the top-k reduction to the caller.
        return CaseResult(
            name,
            ctx.world_size,
            ctx.rank,
            case.tokens,
            case.top_k,
            shape,
            str(out.dtype),
            float("inf"),
            0.0,
            float("inf"),
            False,
        )
    # bf16: each partial sum is rounded once (2^-8 relative) and partials are
    # added in bf16; 2^-6 of the summed magnitudes is loose for that and far
    # below any missing, doubled or misrouted expert (>= |b_e| >= 1/64 per slot).
    allowed = mag * 2.0**-6 + 2.0**-10
    err = (out.float() - ref).abs()
    ratio = float((err / allowed).max().item())
    return CaseResult(
        name,
        ctx.world_size,
        ctx.rank,
        case.tokens,
        case.top_k,
        shape,
        str(out.dtype),
        float(err.max().item()),
        float(allowed.max().item()),
        ratio,
        ratio <= 1.0 and bool(torch.isfinite(out.float()).all().item()),
    )


def run_case(name: str, case: Case, hidden: int = HIDDEN) -> CaseResult:
    return check_output(name, case, combine_case(name, case, hidden))


def time_combine(
    name: str,
    tokens: int,
    top_k: int,
    hidden: int,
    iters: int,
    max_tokens: int = MAX_TOKENS,
    after: Callable[[torch.Tensor], None] | None = None,
) -> tuple[float, float | None]:
    """Median combine time (ms) and, if `after` is given, the median time of
    `after(combined)` (the TP all-reduce) in the same iterations."""
    ctx = ep_context()
    be = backend(name, top_k, hidden, max_tokens)
    case = make_case(ctx, tokens, top_k, hidden)
    combine_ms: list[float] = []
    after_ms: list[float] = []
    for i in range(iters + 3):  # 3 warm-ups
        recv = be.dispatch(case.x, case.ids, case.weights, case.max_tokens_all_ranks)
        expert_out = local_expert_stage(ctx, *recv)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        ev[0].record()
        out = be.combine(expert_out, case.tokens, case.max_tokens_all_ranks)
        ev[1].record()
        if after is not None:
            after(out)
        ev[2].record()
        torch.cuda.synchronize()
        if i >= 3:
            combine_ms.append(ev[0].elapsed_time(ev[1]))
            after_ms.append(ev[1].elapsed_time(ev[2]))
    combine_ms.sort()
    after_ms.sort()
    med = combine_ms[len(combine_ms) // 2]
    return med, (after_ms[len(after_ms) // 2] if after is not None else None)


# ---- evidence: which FlashInfer entry points and modules each backend ran --------------

# The module-level functions through which each backend reaches its compiled kernels; the
# classes look them up as module globals at call time, so wrapping them here sees every call.
ENTRY_POINTS = {
    TWO_SIDED: (two_sided_module, ("moe_prepare", "moe_comm", "moe_comm_prepare_indices", "moe_local_gather")),
    ONE_SIDED: (
        one_sided_module,
        ("moe_a2a_initialize", "moe_a2a_dispatch", "moe_a2a_combine", "moe_a2a_sanitize_expert_ids"),
    ),
}


class CallRecorder:
    """Counts calls of FlashInfer's entry points (ENTRY_POINTS), whichever backend makes them."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        for module, names in ENTRY_POINTS.values():
            if module is None:
                continue
            for name in names:
                original = getattr(module, name, None)
                if original is None or getattr(original, "_recorded", False):
                    continue
                setattr(module, name, self._wrap(f"{module.__name__}.{name}", original))

    def _wrap(self, qualified: str, original: Callable[..., object]) -> Callable[..., object]:
        def recorded(*args: object, **kwargs: object) -> object:
            self.counts[qualified] = self.counts.get(qualified, 0) + 1
            return original(*args, **kwargs)

        setattr(recorded, "_recorded", True)  # noqa: B010 (a mark on the function object, read by getattr)
        return recorded

    def snapshot(self) -> dict[str, int]:
        return dict(self.counts)

    def since(self, before: dict[str, int]) -> dict[str, int]:
        return {k: v - before.get(k, 0) for k, v in sorted(self.counts.items()) if v - before.get(k, 0)}


@functools.cache
def call_recorder() -> CallRecorder:
    return CallRecorder()


def loaded_flashinfer_libraries() -> list[str]:
    """The shared objects of FlashInfer's JIT cache mapped into this process (/proc/self/maps)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    paths = {line.split()[-1] for line in maps.splitlines() if line.rstrip().endswith(".so")}
    return sorted(p for p in paths if "flashinfer" in p)


def workspace_facts(name: str, top_k: int) -> dict[str, object]:
    """Where this backend's workspace lives: a different buffer per backend is part of the evidence."""
    if name == TWO_SIDED:
        ws, prep = MnnvlMoe.moe_workspace_tensor, MnnvlMoe.moe_prepare_workspace_tensor
        return {
            "class": "flashinfer.comm.trtllm_alltoall.MnnvlMoe",
            "workspace": {"shape": list(ws.shape), "dtype": str(ws.dtype), "data_ptr": hex(ws.data_ptr())},
            "prepare_workspace": {
                "shape": list(prep.shape),
                "dtype": str(prep.dtype),
                "data_ptr": hex(prep.data_ptr()),
            },
        }
    be = backend(name, top_k)
    assert isinstance(be, OneSided)
    ws = be.a2a.workspace
    return {
        "class": "flashinfer.comm.trtllm_moe_alltoall.MoeAlltoAll",
        "workspace": {"shape": list(ws.shape), "dtype": str(ws.dtype), "data_ptr": hex(ws.data_ptr())},
        "workspace_size_per_rank": be.a2a.workspace_size_per_rank,
        "init_barrier": INIT_BARRIER,
    }


def _facts_or_error(name: str, top_k: int) -> dict[str, object]:
    try:
        return workspace_facts(name, top_k)
    except Exception as exc:
        return {"error": _err(exc)}


def delay_initialize(rank: int, seconds: float) -> None:
    """On `rank`, start the one-sided workspace's initialize `seconds` late (the race OneSided's barrier
    closes, made deterministic: with --no-init-barrier the peers dispatch before this rank zeroes its slice)."""
    if one_sided_module is None or ep_context().rank != rank:
        return
    original = one_sided_module.moe_a2a_initialize

    def late(*args: object, **kwargs: object) -> object:
        time.sleep(seconds)
        return original(*args, **kwargs)

    one_sided_module.moe_a2a_initialize = late


# ---- one rank's run, reported as events (ep_launcher.py) -----------------------------------


def partials_per_token(ctx: EpContext, case: Case) -> torch.Tensor:
    """How many ranks hold an expert of each token: the number of partial sums combine adds."""
    ranks = case.ids.long() // ctx.experts_per_rank
    hit = torch.zeros(case.tokens, ctx.world_size, device=case.ids.device)
    return hit.scatter_(1, ranks, 1.0).sum(dim=1)


def digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16]


def run_checked_case(
    name: str, case: Case, two_sided_outputs: dict[tuple[int, int], torch.Tensor]
) -> dict[str, object]:
    """One case with everything the report needs: the contract check, the two wrong outputs it
    must reject, and the comparison with the two-sided output of the same case on this rank."""
    ctx = ep_context()
    out = combine_case(name, case)
    result = asdict(check_output(name, case, out))
    # The pre-fix bug: an all-reduce over a TP group of 2 of an output that is already complete.
    rejects_doubled = not check_output(name, case, out * 2).passed
    # An unreduced [T * top_k, H] output; at top-k 1 it is the reduced one, so nothing to reject.
    rejects_unreduced = (
        None if case.top_k == 1 else not check_output(name, case, out.repeat_interleave(case.top_k, dim=0)).passed
    )
    partials = partials_per_token(ctx, case)
    result.update(
        rejects_doubled=rejects_doubled,
        rejects_unreduced=rejects_unreduced,
        max_partials=int(partials.max().item()) if case.tokens else 0,
        tokens_over_two_partials=int((partials > 2).sum().item()),
        output_sha256=digest(out),
    )
    key = (case.top_k, case.tokens)
    if name == TWO_SIDED:
        two_sided_outputs[key] = out
    elif key in two_sided_outputs:
        other = two_sided_outputs[key]
        differ = out != other
        result.update(
            same_as_two_sided=not bool(differ.any().item()),
            elements_differing_from_two_sided=int(differ.sum().item()),
            max_abs_diff_from_two_sided=float((out.float() - other.float()).abs().max().item()),
        )
    result["passed"] = bool(result["passed"]) and rejects_doubled and rejects_unreduced is not False
    return result


class Events:
    """JSON lines for ep_launcher.py (its docstring lists them); a no-op without a path."""

    def __init__(self, path: Path | None) -> None:
        self.handle = path.open("a", encoding="utf-8") if path else None

    def __call__(self, **event: object) -> None:
        if self.handle is not None:
            self.handle.write(json.dumps(event) + "\n")
            self.handle.flush()


def case_id(name: str, top_k: int, tokens: int) -> str:
    return f"{name}/top{top_k}/tok{tokens}"


def main(argv: list[str] | None = None) -> int:
    """Run the whole matrix on this rank; exit 1 if any case fails on any rank."""
    global INIT_BARRIER
    parser = argparse.ArgumentParser(description="FlashInfer combine contract, any EP size")
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    parser.add_argument("--skip-group", action="append", default=[], help="leave this backend out (after a hang)")
    parser.add_argument("--tokens", type=int, action="append")
    parser.add_argument("--top-k", type=int, action="append")
    parser.add_argument("--smoke", action="store_true", help="one case per backend (1 token, top-k 1): can it run?")
    parser.add_argument("--no-init-barrier", action="store_true", help="leave out the barrier OneSided explains")
    parser.add_argument("--delay-init", metavar="RANK:SECONDS", help="start one rank's one-sided initialize late")
    parser.add_argument("--events", type=Path, help="report progress here as JSON lines (ep_launcher.py)")
    parser.add_argument("--json", type=Path, help="rank 0 writes all results here (gathered at the end)")
    args = parser.parse_args(argv)
    INIT_BARRIER = not args.no_init_barrier
    emit = Events(args.events)
    names = [n for n in (args.backend or BACKENDS) if n not in args.skip_group]
    top_ks = [1] if args.smoke else (args.top_k or list(TOP_KS))
    token_counts = [1] if args.smoke else (args.tokens or list(TOKEN_COUNTS))
    matrix = [(n, k, t) for n in names for k in top_ks for t in token_counts]
    emit(
        event="plan",
        cases=[{"id": case_id(*c), "group": c[0], "label": f"top-k {c[1]}, {c[2]} tokens"} for c in matrix],
    )
    ctx = ep_context()
    recorder = call_recorder()
    if args.delay_init:
        rank, _, seconds = args.delay_init.partition(":")
        delay_initialize(int(rank), float(seconds))
    results: list[dict[str, object]] = []
    two_sided_outputs: dict[tuple[int, int], torch.Tensor] = {}
    for name in names:
        group_cases = [c for c in matrix if c[0] == name]
        calls_before, libs_before = recorder.snapshot(), set(loaded_flashinfer_libraries())
        started = time.time()
        why = missing(name)
        if why is None and group_cases:
            # The first workspace (and, where it is not cached yet, the JIT build) says whether
            # this backend can run here at this EP size at all.
            emit(event="setup", group=name, what="first workspace and JIT module")
            try:
                backend(name, group_cases[0][1])
            except Exception as exc:
                why = f"building its workspace failed: {_err(exc)}"
        emit(event="group", group=name, can_run=why is None, reason=why or "")
        if why is not None:
            for _, k, t in group_cases:
                emit(event="result", case=case_id(name, k, t), passed=False, skipped=True, reason=why)
            continue
        for _, k, t in group_cases:
            cid = case_id(name, k, t)
            try:
                emit(event="setup", group=name, what=f"workspace top-k {k} (and the JIT module the first time)")
                backend(name, k)
                emit(event="start", case=cid)
                case_started = time.time()
                res = run_checked_case(name, make_case(ctx, t, k), two_sided_outputs)
                ended = time.time()
                res.update(started_at=case_started, ended_at=ended, wall_s=round(ended - case_started, 4))
            except Exception as exc:
                res = {
                    "backend": name,
                    "ep_size": ctx.world_size,
                    "rank": ctx.rank,
                    "tokens": t,
                    "top_k": k,
                    "passed": False,
                    "error": _err(exc),
                }
            results.append(res)
            emit(event="result", case=cid, **res)
            print(json.dumps(res), flush=True)
        emit(
            event="evidence",
            group=name,
            entry_points_called=recorder.since(calls_before),
            jit_modules_loaded=sorted(set(loaded_flashinfer_libraries()) - libs_before),
            workspace=_facts_or_error(name, group_cases[0][1]) if group_cases else {},
            wall_s=round(time.time() - started, 3),
        )
    failed = [r for r in results if not r["passed"]]
    if args.json:
        gathered: list[list[dict[str, object]] | None] = [None] * ctx.world_size
        dist.all_gather_object(gathered, results, group=ctx.group)
        flat = [r for rank_results in gathered for r in (rank_results or [])]
        failed = [r for r in flat if not r["passed"]]
        if ctx.rank == 0:
            print(f"EP {ctx.world_size}: {len(flat) - len(failed)} passed, {len(failed)} failed (cases x ranks)")
            args.json.write_text(json.dumps(flat, indent=1) + "\n")
        dist.barrier(group=ctx.group)
    emit(event="done")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
