"""vLLM's reduce decision on a GPU with FlashInfer's real two-sided dispatch and combine.

vllm_reduce_gpu.py says what runs and what stands in (the TP all-reduce's transport is
gloo: NCCL refuses two ranks on one GPU). The layouts are the CPU suite's: TP1 x DP2
(EP 2), where the TP factor is 1 and the flag cannot matter, and TP2 x DP2 (EP 4), the
reported deployment, where the pristine flag doubles the routed output. vLLM uses the
all2all kernels only with DP > 1, so EP 2 with TP 2 is not a layout vLLM builds.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

PROGRAM = [sys.executable, str(Path(__file__).resolve().parent / "vllm_reduce_gpu.py")]


@pytest.mark.parametrize(("ep_size", "tp_size"), [(2, 1), (4, 2)])
def test_patched_flag_gives_the_reference_and_the_pristine_one_the_tp_multiple(ep_size: int, tp_size: int) -> None:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed here; the GPU run carries its Python files (run_on_device.sh)")
    import ep_launcher

    run = ep_launcher.run_ep(ep_size, ["--tp", str(tp_size)], PROGRAM, case_deadline_s=60.0, setup_deadline_s=240.0)
    ep_launcher.save_report(run, f"vllm-reduce-ep{ep_size}-tp{tp_size}.json")
    print("\n" + ep_launcher.format_summary([run]))
    assert not run.hangs and not run.crashes, [h.message for h in run.hangs] + run.crashes
    for variant in ("patched", "pristine"):
        outcomes = [o for o in run.outcomes if o.group == variant]
        bad = [o for o in outcomes if o.status != ep_launcher.PASSED]
        assert outcomes and not bad, f"{variant}: {bad[:2]}"
        reduced = {o.detail["fused_output_is_reduced"] for o in outcomes}
        all_reduces = {o.detail["tp_all_reduce_calls"] for o in outcomes}
        # The runner asks the class, and all-reduces exactly when it says the output is not reduced.
        assert reduced == {variant == "patched"}
        assert all_reduces == ({0} if variant == "patched" else {1})
        calls = {fn for ev in run.groups[variant].evidence.values() for fn in ev["entry_points_called"]}
        assert {"flashinfer.comm.trtllm_alltoall.moe_prepare", "flashinfer.comm.trtllm_alltoall.moe_comm"} <= calls
        if variant == "pristine" and tp_size > 1:
            # Off by the TP factor: far from the reference, at the reference times TP.
            assert min(o.detail["relative_error"]["vs_reference"] for o in outcomes if o.detail["tokens"]) > 0.5
