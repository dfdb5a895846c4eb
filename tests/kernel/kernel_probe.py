"""Probe: can FlashInfer's NVLink MoE all-to-all kernels run on this machine?

Runs standalone (``python tests/kernel/kernel_probe.py [--ep 2 --ep 4] [--json PATH]``)
and from the kernel tests. Every check records either its value or the exact error, so a
backend that cannot run here is reported with the reason instead of a bare skip. EP 1 runs
in this process; each larger EP size runs one token per backend as that many rank processes
on this machine (ep_launcher.py, with its deadlines), so a backend that hangs at an EP size
is reported as unable to run there, with the deadline message as the reason.

Only device *attributes* are read for multicast; no multicast object is ever
created (cuMulticastCreate can take a shared host's GPUs down).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
VERIFIED_TOML = REPO_ROOT / "vendor" / "vllm_fused_moe" / "VERIFIED.toml"
BACKENDS = ("flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided")
# The FlashInfer class each vLLM backend drives (vLLM 0.20/0.21 all2all.py).
BACKEND_API = {
    "flashinfer_nvlink_two_sided": "flashinfer.comm.trtllm_alltoall.MnnvlMoe",
    "flashinfer_nvlink_one_sided": "flashinfer.comm.trtllm_moe_alltoall.MoeAlltoAll",
}


@dataclass
class BackendStatus:
    backend: str
    api: str
    ep_size: int
    can_run: bool
    reason: str


@dataclass
class ProbeResult:
    python: str = platform.python_version()
    machine: str = platform.machine()
    torch: str = "missing"
    cuda_available: bool = False
    device: str = "-"
    compute_capability: str = "-"
    driver: str = "-"
    torch_cuda: str = "-"
    attr_vmm: str = "-"
    attr_posix_fd_handles: str = "-"
    attr_fabric_handles: str = "-"
    attr_multicast: str = "-"
    fabric_alloc: str = "not tried"
    posix_fd_alloc: str = "not tried"
    nvlink_all_up: str = "not tried"
    flashinfer: str = "missing"
    verified_specifier: str = "-"
    flashinfer_verified: bool = False
    mnnvl_workspace: str = "not tried"
    backends: list[BackendStatus] = field(default_factory=list)
    # The same question at each EP size > 1, asked of that many rank processes (--ep).
    ep_backends: list[BackendStatus] = field(default_factory=list)
    skip_reason: str | None = None


def _err(exc: BaseException) -> str:
    """One line, bounded: the exact error, as the probe's reason."""
    text = f"{type(exc).__name__}: {exc}".replace("\n", " | ")
    return text if len(text) <= 400 else text[:397] + "..."


def verified_specifier() -> str:
    from release.queue.verified import read_verified

    return read_verified(VERIFIED_TOML).specifier


def version_matches(version: str, specifier: str) -> bool:
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:  # packaging absent: only an exact pin can be judged
        return specifier == f"=={version}"
    return version in SpecifierSet(specifier)


def environment_reason() -> str | None:
    """Cheap check used at collection time: None when the kernels may run."""
    try:
        import torch
    except ImportError as exc:
        return f"torch is not importable ({exc}); the FlashInfer kernel contract needs torch with CUDA"
    if not torch.cuda.is_available():
        return (
            f"no CUDA device (torch {torch.__version__}, built for CUDA "
            f"{torch.version.cuda}): FlashInfer's NVLink all-to-all kernels need an NVIDIA GPU; "
            "run `nox -s kernel` on a GPU machine"
        )
    if importlib.util.find_spec("flashinfer") is None:
        return (
            "flashinfer-python is not installed; install the version pinned in "
            f"{VERIFIED_TOML.relative_to(REPO_ROOT)} ({verified_specifier()})"
        )
    return None


def _driver_checks(result: ProbeResult, dev: int) -> None:
    from cuda.bindings import driver as cu

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        out = fn(*args)
        status, rest = out[0], out[1:]
        if status != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{fn.__name__} -> {status.name}")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    call(cu.cuInit, 0)
    cudev = call(cu.cuDeviceGet, dev)
    attr = cu.CUdevice_attribute
    for name, enum in (
        ("attr_vmm", attr.CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED),
        ("attr_posix_fd_handles", attr.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED),
        ("attr_fabric_handles", attr.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED),
        ("attr_multicast", attr.CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED),
    ):
        try:
            setattr(result, name, str(call(cu.cuDeviceGetAttribute, enum, cudev)))
        except Exception as exc:
            setattr(result, name, _err(exc))

    # Try one VMM allocation per handle type, exported but never mapped across
    # processes: FlashInfer asks for FABRIC on aarch64 (GB200) and
    # POSIX_FILE_DESCRIPTOR on x86_64, so both answers matter.
    handle = cu.CUmemAllocationHandleType
    for name, htype in (
        ("fabric_alloc", handle.CU_MEM_HANDLE_TYPE_FABRIC),
        ("posix_fd_alloc", handle.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
    ):
        mem = None
        try:
            prop = cu.CUmemAllocationProp()
            prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            prop.requestedHandleTypes = htype
            location = cu.CUmemLocation()
            location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            location.id = dev
            prop.location = location
            gran = call(
                cu.cuMemGetAllocationGranularity,
                prop,
                cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
            mem = call(cu.cuMemCreate, int(gran), prop, 0)
            shared = call(cu.cuMemExportToShareableHandle, mem, htype, 0)
            if htype == handle.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR:
                os.close(int(shared))
            setattr(result, name, f"ok (cuMemCreate+export, {int(gran)} B)")
        except Exception as exc:
            setattr(result, name, _err(exc))
        finally:
            if mem is not None:
                cu.cuMemRelease(mem)


def probe_ep_sizes(ep_sizes: list[int], setup_deadline_s: float = 300.0) -> list[BackendStatus]:
    """Per backend and EP size: one token through dispatch and combine, each rank a process."""
    import ep_launcher

    statuses = []
    for ep_size in ep_sizes:
        run = ep_launcher.run_ep(ep_size, ["--smoke"], case_deadline_s=60.0, setup_deadline_s=setup_deadline_s)
        for name in BACKENDS:
            group = run.groups.get(name)
            if group is None:
                why = "; ".join(run.crashes)[:400] or "no rank reported this backend"
                statuses.append(BackendStatus(name, BACKEND_API[name], ep_size, False, why))
                continue
            failures = [o.reason for o in run.outcomes if o.group == name and o.status != ep_launcher.PASSED]
            can_run = bool(group.can_run) and group.verdict == ep_launcher.PASSED
            reason = (
                f"1-token round trip on {ep_size} processes ok in {group.wall_s:.1f}s"
                if can_run
                else (group.reason or (failures[0] if failures else "no result"))
            )
            statuses.append(BackendStatus(name, BACKEND_API[name], ep_size, can_run, reason[:400]))
    return statuses


def run_probe(try_backends: bool = True, ep_sizes: list[int] | None = None) -> ProbeResult:
    result = ProbeResult()
    try:
        result.verified_specifier = verified_specifier()
    except Exception as exc:
        result.verified_specifier = _err(exc)
    try:
        import torch
    except ImportError as exc:
        result.skip_reason = environment_reason() or _err(exc)
        return result
    result.torch = torch.__version__
    result.torch_cuda = str(torch.version.cuda)
    result.cuda_available = torch.cuda.is_available()
    try:
        result.flashinfer = importlib.metadata.version("flashinfer-python")
        result.flashinfer_verified = version_matches(result.flashinfer, result.verified_specifier)
    except importlib.metadata.PackageNotFoundError:
        pass
    result.skip_reason = environment_reason()
    if not result.cuda_available:
        return result

    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    result.device = props.name
    result.compute_capability = f"{props.major}.{props.minor}"
    try:
        import pynvml

        pynvml.nvmlInit()
        result.driver = str(pynvml.nvmlSystemGetDriverVersion())
    except Exception as exc:
        result.driver = _err(exc)
    try:
        _driver_checks(result, dev)
    except Exception as exc:
        result.fabric_alloc = result.posix_fd_alloc = _err(exc)

    if result.skip_reason is not None or not try_backends:
        return result

    try:
        import kernel_contract as kc
    except Exception as exc:
        reason = f"importing FlashInfer comm modules failed: {_err(exc)}"
        result.mnnvl_workspace = reason
        for name in BACKENDS:
            result.backends.append(BackendStatus(name, BACKEND_API[name], 1, False, reason))
        return result

    ctx = kc.ep_context()
    try:
        from flashinfer.comm.mnnvl import MnnvlMemory

        result.nvlink_all_up = str(MnnvlMemory.supports_mnnvl())
    except Exception as exc:
        result.nvlink_all_up = _err(exc)
    result.mnnvl_workspace = kc.try_mnnvl_memory(ctx)
    for name in BACKENDS:
        ok, reason = kc.try_backend(ctx, name)
        result.backends.append(BackendStatus(name, BACKEND_API[name], ctx.world_size, ok, reason))
    # After the in-process probe, which built the JIT modules the rank processes then load.
    result.ep_backends = probe_ep_sizes([n for n in ep_sizes or [] if n > 1])
    return result


def format_table(result: ProbeResult) -> str:
    rows: list[tuple[str, str]] = [
        ("python / arch", f"{result.python} / {result.machine}"),
        ("torch (CUDA)", f"{result.torch} ({result.torch_cuda})"),
        ("CUDA device", result.device),
        ("compute capability", result.compute_capability),
        ("driver", result.driver),
        ("VMM supported (attr 102)", result.attr_vmm),
        ("POSIX-fd handles (attr 103)", result.attr_posix_fd_handles),
        ("fabric handles (attr 128)", result.attr_fabric_handles),
        ("multicast (attr 132, read only)", result.attr_multicast),
        ("fabric-handle allocation", result.fabric_alloc),
        ("POSIX-fd allocation", result.posix_fd_alloc),
        ("NVLink all up (FlashInfer supports_mnnvl)", result.nvlink_all_up),
        ("MNNVL workspace (FlashInfer MnnvlMemory)", result.mnnvl_workspace),
        ("flashinfer-python", result.flashinfer),
        ("VERIFIED.toml specifier", result.verified_specifier),
        ("version verified", str(result.flashinfer_verified)),
    ]
    for b in [*result.backends, *result.ep_backends]:
        verdict = "CAN RUN" if b.can_run else "cannot run"
        rows.append((f"{b.backend} (ep_size {b.ep_size})", f"{verdict}: {b.reason}"))
    if result.skip_reason:
        rows.append(("skip reason", result.skip_reason))
    width = max(len(k) for k, _ in rows)
    lines = [f"| {'check'.ljust(width)} | result", f"|-{'-' * width}-|-------"]
    lines += [f"| {k.ljust(width)} | {v}" for k, v in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    parser.add_argument("--no-backends", action="store_true", help="skip JIT build and workspaces")
    parser.add_argument(
        "--ep", type=int, action="append", default=[], help="also probe at this EP size as that many processes"
    )
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.ep):
        parser.error(f"an EP size is at least 1, got {args.ep}")
    result = run_probe(try_backends=not args.no_backends, ep_sizes=args.ep)
    print(format_table(result))
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    # Run as a script on a GPU box (`python3 tests/kernel/kernel_probe.py`), with no pytest to apply
    # pyproject's pythonpath: Python puts this folder on sys.path, not the checkout that holds `release`.
    sys.path.append(str(REPO_ROOT))
    raise SystemExit(main())
