"""The EP launcher's deadlines, kills and reports, on any machine.

The ranks here are tests/kernel/rank_double.py, a test double for the GPU rank program
(kernel_contract.py needs a GPU and FlashInfer): it speaks the same events protocol and
hangs, crashes or stalls in setup on request. Nothing here needs torch.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

import ep_launcher

DOUBLE = [sys.executable, str(Path(__file__).resolve().parent / "rank_double.py")]


def run(ep_size: int, *args: str, case_deadline_s: float = 1.5, setup_deadline_s: float = 5.0) -> ep_launcher.EpRun:
    return ep_launcher.run_ep(
        ep_size, ["--cases", "2", *args], DOUBLE, case_deadline_s=case_deadline_s, setup_deadline_s=setup_deadline_s
    )


def statuses(result: ep_launcher.EpRun, group: str) -> list[str]:
    return [o.status for o in result.outcomes if o.group == group]


def test_a_hung_case_fails_by_name_and_the_other_backend_still_reports() -> None:
    started = time.monotonic()
    result = run(2, "--hang-at", "one/c0")
    assert time.monotonic() - started < 1.5 + ep_launcher.TERM_GRACE_S + 5  # the deadline, not the hour-long sleep
    (hang,) = result.hangs
    assert (hang.ep_size, hang.group, hang.case) == (2, "one", "one/c0")
    hung = [o for o in result.outcomes if o.case == "one/c0"]
    assert [o.status for o in hung] == [ep_launcher.FAILED] * 2
    assert "EP 2, backend one, case one case 0" in hung[0].reason and "deadline" in hung[0].reason
    assert statuses(result, "one") == [ep_launcher.FAILED] * 2 + [ep_launcher.NOT_RUN] * 2
    assert statuses(result, "two") == [ep_launcher.PASSED] * 4
    assert result.groups["one"].verdict == ep_launcher.FAILED and not result.ok
    assert result.launches == 1  # group two was complete: no restart needed


def test_after_a_hang_the_ranks_restart_for_the_backends_not_yet_run() -> None:
    result = run(2, "--hang-at", "two/c1", "--hang-rank", "1")
    assert result.launches == 2
    # The double's rank 0 has no collective to wait in, so it finished its cases before the stop.
    assert statuses(result, "two") == [ep_launcher.PASSED] * 3 + [ep_launcher.FAILED]
    assert statuses(result, "one") == [ep_launcher.PASSED] * 4
    assert "rank 1" in result.hangs[0].message


def test_a_rank_stuck_in_setup_is_stopped_at_the_setup_deadline() -> None:
    result = run(2, "--setup-sleep", "60", setup_deadline_s=1.0)
    (hang,) = result.hangs
    assert hang.case == "setup"
    assert {o.status for o in result.outcomes} == {ep_launcher.NOT_RUN}
    assert len(result.outcomes) == 2 * 2 * 2  # every planned (case, rank) has an outcome


def test_a_crashed_rank_fails_its_case_and_stops_the_others() -> None:
    result = run(3, "--crash-at", "two/c1")
    assert result.crashes and "rank 1 exited with 3" in result.crashes[0] and "two case 1" in result.crashes[0]
    crashed = next(o for o in result.outcomes if o.case == "two/c1" and o.rank == 1)
    assert crashed.status == ep_launcher.FAILED
    assert not result.ok


def test_a_backend_that_cannot_run_is_skipped_with_its_reason() -> None:
    result = run(2, "--cannot-run", "one")
    group = result.groups["one"]
    assert (group.can_run, group.reason, group.skipped, group.verdict) == (
        False,
        "one is absent here",
        4,
        ep_launcher.SKIPPED,
    )
    assert result.groups["two"].verdict == ep_launcher.PASSED and result.ok
    assert result.groups["two"].evidence[1] == {"calls": {"two_entry": 2}}


@pytest.mark.parametrize(("ep_size", "case_s", "setup_s"), [(0, 1.0, 1.0), (2, 0.0, 1.0), (2, 1.0, -1.0)])
def test_bad_input_is_refused_before_any_process_starts(
    tmp_path: Path, ep_size: int, case_s: float, setup_s: float
) -> None:
    with pytest.raises(ep_launcher.LauncherInputError):
        ep_launcher.run_ep(ep_size, [], DOUBLE, case_s, setup_s, workdir=tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_cli_writes_json_and_a_table_and_exits_1_on_a_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "runs.json"
    code = ep_launcher.main(
        [
            "--ep",
            "2",
            "--case-deadline",
            "1",
            "--json",
            str(out),
            "--program",
            *DOUBLE,
            "--",
            "--cases",
            "2",
            "--hang-at",
            "two/c0",
        ]
    )
    assert code == 1
    (data,) = json.loads(out.read_text())
    assert data["ep_size"] == 2 and data["groups"]["two"]["verdict"] == ep_launcher.FAILED
    assert data["groups"]["one"]["verdict"] == ep_launcher.PASSED
    assert "| 2 | two | yes | 0 | 2 | 0 | 2 |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        ep_launcher.main(["--ep", "0", "--program", *DOUBLE])
    assert exit_info.value.code == 2
