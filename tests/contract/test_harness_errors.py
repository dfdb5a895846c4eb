"""Bad input fails fast and clearly; a failing rank never leaves the others hanging."""

import multiprocessing
import time
from pathlib import Path

import pytest

from moe_contract.launcher import HarnessWorkerError, run_contract
from moe_contract.layout import HarnessInputError, ParallelLayout
from moe_contract.prepare_finalize_sources import vendored_variant
from moe_contract.problem import MoEProblem

# The launcher's own error paths, the same with any release: the `test` session runs them once.
pytestmark = pytest.mark.any_release


def _problem(top_k: int = 2) -> MoEProblem:
    return MoEProblem(seed=0, payload_dtype="float32", top_k=top_k, shared_experts=False, tokens_per_dp_rank=(2, 3))


@pytest.mark.timeout(10)
def test_world_size_not_divisible_by_tp_is_rejected() -> None:
    with pytest.raises(HarnessInputError, match="world_size 3 is not divisible by tp_size 2"):
        ParallelLayout(world_size=3, tp_size=2)


@pytest.mark.timeout(10)
def test_top_k_larger_than_experts_is_rejected_before_any_process_starts(tmp_path: Path) -> None:
    with pytest.raises(HarnessInputError, match="top_k 17 must be between 1 and the number of experts 16"):
        run_contract(ParallelLayout(2, 1), (_problem(top_k=17),), (vendored_variant(tmp_path / "sources"),), tmp_path)
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(10)
def test_token_pattern_must_match_dp_size(tmp_path: Path) -> None:
    with pytest.raises(HarnessInputError, match="DP size is 4"):
        run_contract(ParallelLayout(4, 1), (_problem(),), (vendored_variant(tmp_path / "sources"),), tmp_path)


@pytest.mark.timeout(120)
def test_failing_rank_stops_the_ranks_blocked_in_a_collective(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(HarnessWorkerError, match="InjectedFault: rank 0 fails on purpose"):
        run_contract(
            ParallelLayout(2, 1),
            (_problem(),),
            (vendored_variant(tmp_path / "sources"),),
            tmp_path,
            timeout_s=90,
            fail_on_rank=0,
        )
    # Rank 1 waits in a gloo barrier that has a 30-minute default timeout; only the
    # launcher stopping it ends the run this early.
    assert time.monotonic() - started < 90
    assert multiprocessing.active_children() == []
