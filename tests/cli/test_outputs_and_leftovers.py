"""Outputs are checked before the swap, a failure after it tells the truth, and every leftover has a way out.

A damaged state file of a stopped rebase (no git needed) is tests/unit/test_cli_main.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_release, snapshot, work_leftovers
from helpers.failure import failed
from helpers.synthetic import NEXT_TAG, make_dir, next_tree
from release.core.errors import AfterSwapError, OutputNotWritableError


@pytest.fixture
def source(project: Path, tmp_path: Path) -> str:
    return f"dir:{make_dir(tmp_path / 'src', next_tree(project), NEXT_TAG.removeprefix('v'))}"


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_report_under_a_regular_file_is_exit_2_before_anything(
    project: Path, tmp_path: Path, source: str, dry_run: bool
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    before = snapshot(project)
    args = ["rebase", NEXT_TAG, "--from", source, "--report", str(blocker / "r"), *(["--dry-run"] * dry_run)]
    result = run_release(project, *args)
    assert result.returncode == 2, result.stderr
    error = failed(result)
    assert error.reference == OutputNotWritableError.reference and "cannot write the report" in error.message
    assert "Traceback" not in result.stderr
    assert snapshot(project) == before and work_leftovers(project) == []


def test_a_report_that_fails_after_the_swap_says_the_rebase_is_done(project: Path, tmp_path: Path, source: str) -> None:
    report = tmp_path / "r"
    (report / "rebase-report.md").mkdir(parents=True)  # the directory is fine; the file cannot be written
    before = snapshot(project)
    result = run_release(project, "rebase", NEXT_TAG, "--from", source, "--report", str(report))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    error = failed(result)
    assert error.reference == AfterSwapError.reference and f"the rebase onto {NEXT_TAG} is done" in error.message
    assert snapshot(project) != before
    assert f'tag = "{NEXT_TAG}"' in (project / "vendor/vllm_fused_moe/UPSTREAM.toml").read_text()
    assert run_release(project, "check").returncode == 0 and work_leftovers(project) == []


def test_a_work_dir_a_killed_rebase_left_has_a_way_out(project: Path, source: str) -> None:
    work = project / ".work" / f"rebase-{NEXT_TAG}"
    (work / "repo").mkdir(parents=True)  # what a SIGKILL during the replay leaves: no state.json
    resumed = run_release(project, "rebase", "--continue", str(work))
    assert resumed.returncode == 2, resumed.stderr
    assert "holds no conflict to continue" in resumed.stderr and f"--abort {work}" in resumed.stderr
    aborted = run_release(project, "rebase", "--abort", str(work))
    assert aborted.returncode == 0 and not work.exists(), aborted.stderr
    (work / "repo").mkdir(parents=True)
    again = run_release(project, "rebase", NEXT_TAG, "--from", source)
    assert again.returncode == 0, again.stderr
    assert "killed before it stopped at a conflict" in again.stderr
    assert work_leftovers(project) == []
