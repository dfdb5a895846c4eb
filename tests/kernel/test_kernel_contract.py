"""FlashInfer combine returns one already-reduced row per token (patch 0001's premise).

Each case dispatches known tokens through the real FlashInfer kernels, applies
per-expert output patterns on the receiving rank, combines, and compares every
element with sum_j w_j f_{e_j}(x). A backend that cannot run on this machine is
skipped with the probe's exact reason; a wrong sum fails.
"""

from __future__ import annotations

import pytest

import kernel_probe

pytestmark = pytest.mark.gpu

TOKEN_COUNTS = (1, 7, 128, 4096)
TOP_KS = (1, 2, 8)


@pytest.mark.parametrize("tokens", TOKEN_COUNTS)
@pytest.mark.parametrize("top_k", TOP_KS)
@pytest.mark.parametrize("backend", kernel_probe.BACKENDS)
def test_combine_returns_sum_over_topk(probe: kernel_probe.ProbeResult, backend: str, top_k: int, tokens: int) -> None:
    status = next(b for b in probe.backends if b.backend == backend)
    if not status.can_run:
        pytest.skip(
            f"{backend} cannot run here (ep_size {status.ep_size}): {status.reason}; "
            "the multi-GPU issue runs it with torchrun"
        )
    import kernel_contract as kc

    ctx = kc.ep_context()
    result = kc.run_case(backend, kc.make_case(ctx, tokens, top_k))
    assert result.shape == (tokens, kc.HIDDEN), (
        f"combine returned {result.shape}, not one row per token: not reduced over top-k"
    )
    assert result.dtype == "torch.bfloat16"
    assert result.passed, (
        f"combine != sum over top-k: max|err| {result.max_abs_err:.4g}, worst err/allowed {result.worst_ratio:.3g}"
    )


@pytest.mark.parametrize("backend", kernel_probe.BACKENDS)
def test_check_catches_the_double_reduction(probe: kernel_probe.ProbeResult, backend: str) -> None:
    """The check above can fail: the pre-fix bug (vLLM all-reducing the already
    reduced combine output over TP 2, i.e. doubling it) and an unreduced
    [T * top_k, H] output must both be rejected."""
    status = next(b for b in probe.backends if b.backend == backend)
    if not status.can_run:
        pytest.skip(f"{backend} cannot run here: {status.reason}")
    import kernel_contract as kc

    ctx = kc.ep_context()
    case = kc.make_case(ctx, tokens=128, top_k=8)
    out = kc.combine_case(backend, case)
    assert kc.check_output(backend, case, out).passed
    tp = 2
    assert not kc.check_output(backend, case, out * tp).passed, "doubled output not caught"
    unreduced = out.repeat_interleave(case.top_k, dim=0)
    assert not kc.check_output(backend, case, unreduced).passed, "[T*k, H] output not caught"


@pytest.mark.parametrize("ep_size", [2])
def test_cross_rank_reduction_processes_sharing_gpus(probe: kernel_probe.ProbeResult, ep_size: int) -> None:
    """At EP 1 every top-k slot targets rank 0, so combine sums one partial per
    token. The reduction that the old TP all-reduce duplicated is the one across
    EP ranks: run EP 2 as two processes (on however many GPUs there are; two
    processes may share one GPU, the MNNVL workspace then uses POSIX-fd handles)."""
    # A backend this FlashInfer does not have (one-sided on 0.5.x) is left out; any other that cannot run skips.
    runnable = [b for b in probe.backends if b.can_run]
    if not runnable:
        pytest.skip("no backend can run here: " + "; ".join(b.reason for b in probe.backends))
    import kernel_contract as kc

    absent = [b for b in probe.backends if not b.can_run and kc.missing(b.backend)]
    if len(runnable) + len(absent) != len(probe.backends):
        pytest.skip("a backend cannot run here: " + "; ".join(b.reason for b in probe.backends if not b.can_run))
    import json
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nproc-per-node",
                str(ep_size),
                "--master-port",
                str(29500 + os.getpid() % 1000),
                str(here / "kernel_contract.py"),
                "--json",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=420,
            check=False,
            env={
                **os.environ,
                "NCCL_NVLS_ENABLE": "0",
                "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1",
            },
        )
        tail = (proc.stdout + proc.stderr)[-3000:]
        assert out.exists(), f"torchrun rc={proc.returncode}, no results:\n{tail}"
        results = json.loads(out.read_text())
    expected = len(runnable) * len(TOP_KS) * len(TOKEN_COUNTS) * ep_size
    failed = [r for r in results if not r["passed"]]
    assert len(results) == expected, tail
    assert not failed, f"{len(failed)} of {len(results)} (case, rank) failed: {failed[:3]}"
    assert proc.returncode == 0, tail
