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


@pytest.mark.parametrize("ep_size", [2, 4])
def test_contract_at_ep_size_each_rank_a_process(probe: kernel_probe.ProbeResult, ep_size: int) -> None:
    """At EP 1 every top-k slot of a token targets rank 0, so combine sums one partial per
    token. The reduction that the old TP all-reduce duplicated is the one across EP ranks:
    here every rank is a process (ep_launcher.py; several share one GPU, the MNNVL workspace
    then uses POSIX-fd handles), each case has a deadline, and a hang fails the case that hung.
    Every case must match the top-k sum, reject the doubled and the unreduced output, and each
    backend must have called its own FlashInfer entry points on its own workspace."""
    import ep_launcher
    import kernel_contract as kc

    runnable = [b.backend for b in probe.backends if b.can_run]
    absent = [b for b in probe.backends if not b.can_run and kc.missing(b.backend)]
    if not runnable:
        pytest.skip("no backend can run here: " + "; ".join(b.reason for b in probe.backends))
    if len(runnable) + len(absent) != len(probe.backends):
        pytest.skip("a backend cannot run here: " + "; ".join(b.reason for b in probe.backends if not b.can_run))
    run = ep_launcher.run_ep(ep_size, case_deadline_s=60.0, setup_deadline_s=180.0)
    ep_launcher.save_report(run, f"ep{ep_size}.json")
    print("\n" + ep_launcher.format_summary([run]))
    assert not run.hangs, [h.message for h in run.hangs]
    assert not run.crashes, run.crashes
    for b in absent:
        group = run.groups[b.backend]
        assert group.can_run is False and group.skipped == len(TOP_KS) * len(TOKEN_COUNTS) * ep_size, group
    calls = {}
    for name in runnable:
        group = run.groups[name]
        assert group.can_run, f"{name} at EP {ep_size}: {group.reason}"
        outcomes = [o for o in run.outcomes if o.group == name]
        assert len(outcomes) == len(TOP_KS) * len(TOKEN_COUNTS) * ep_size
        bad = [o for o in outcomes if o.status != ep_launcher.PASSED]
        assert not bad, f"{len(bad)} of {len(outcomes)} (case, rank) failed, e.g. {bad[:2]}"
        for o in outcomes:
            assert o.detail["rejects_doubled"], o
            assert o.detail["rejects_unreduced"] is (None if o.detail["top_k"] == 1 else True), o
        assert set(group.evidence) == set(range(ep_size)), f"{name}: evidence from ranks {sorted(group.evidence)}"
        calls[name] = {fn for ev in group.evidence.values() for fn in ev["entry_points_called"]}
    # Each backend ran its own kernels: its entry points, none of the other's.
    if kc.TWO_SIDED in calls:
        two = calls[kc.TWO_SIDED]
        assert {"flashinfer.comm.trtllm_alltoall.moe_prepare", "flashinfer.comm.trtllm_alltoall.moe_comm"} <= two
        assert not any("trtllm_moe_alltoall" in fn for fn in two), two
    if kc.ONE_SIDED in calls:
        one = calls[kc.ONE_SIDED]
        assert {
            "flashinfer.comm.trtllm_moe_alltoall.moe_a2a_dispatch",
            "flashinfer.comm.trtllm_moe_alltoall.moe_a2a_combine",
        } <= one
        assert not any("trtllm_alltoall.moe_" in fn for fn in one), one
