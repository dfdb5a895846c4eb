"""`rebase` onto a tag older than the head says so (and refuses unless asked); every run's report is kept.

Offline: the "releases" are vendor/'s own pristine tree (tests/helpers/synthetic.py) given a version
older or newer than the head, read through the real `dir:` source by the real CLI in a process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_release, snapshot, work_leftovers
from helpers.failure import failed
from helpers.synthetic import NEXT_TAG, make_dir, next_tree, pristine
from release.core.errors import OlderTagError
from release.model.pin import Pin


def older_tag(head: str) -> str:
    """A tag no real source has, older than `head` (vX.Y.Z): one patch release below, or the minor below."""
    major, minor, patch = (int(part) for part in head.removeprefix("v").split(".")[:3])
    if patch:
        return f"v{major}.{minor}.{patch - 1}"
    return f"v{major}.{minor - 1}.99" if minor else f"v{major - 1}.99.99"


def head_of(project: Path) -> str:
    return Pin.load(project / "vendor/vllm_fused_moe/UPSTREAM.toml").tag


@pytest.fixture
def older(project: Path, tmp_path: Path) -> tuple[str, str]:
    """(an older tag, a dir: source of it): the head's pristine tree under an older version."""
    tag = older_tag(head_of(project))
    return tag, f"dir:{make_dir(tmp_path / 'older', pristine(project), tag.removeprefix('v'))}"


def test_an_older_tag_is_refused_with_exit_2_and_nothing_changes(
    project: Path, tmp_path: Path, older: tuple[str, str]
) -> None:
    tag, source = older
    head = head_of(project)
    before = snapshot(project)
    result = run_release(project, "rebase", tag, "--from", source, "--report", str(tmp_path / "r"))
    assert result.returncode == 2, (result.stdout, result.stderr)
    error = failed(result)
    assert error.reference == OlderTagError.reference and f"{tag} is older than the head {head}" in error.message
    assert "--allow-older" in error.hint
    assert "Traceback" not in result.stderr
    assert snapshot(project) == before and work_leftovers(project) == []
    assert not (tmp_path / "r").exists()


def test_allow_older_moves_the_head_back_and_says_so_on_stderr_and_in_both_reports(
    project: Path, tmp_path: Path, older: tuple[str, str]
) -> None:
    tag, source = older
    head = head_of(project)
    result = run_release(project, "rebase", tag, "--from", source, "--allow-older", "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert head_of(project) == tag
    assert f"{tag} is older than the head {head}: this rebase moves the head backwards" in result.stderr
    report = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    assert (report["old_tag"], report["new_tag"], report["direction"]) == (head, tag, "backward")
    markdown = (tmp_path / "r" / "rebase-report.md").read_text()
    assert f"**backwards: {tag} is older than the head {head}" in markdown
    assert run_release(project, "check").returncode == 0


def test_a_dry_run_onto_an_older_tag_goes_on_and_says_it_would_move_the_head_back(
    project: Path, tmp_path: Path, older: tuple[str, str]
) -> None:
    tag, source = older
    before = snapshot(project)
    result = run_release(project, "rebase", tag, "--from", source, "--dry-run", "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert snapshot(project) == before
    assert "this rebase would move the head backwards" in result.stderr
    report = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    assert report["direction"] == "backward" and report["dry_run"] is True
    assert "this would move vendor/" in (tmp_path / "r" / "rebase-report.md").read_text()


def test_a_newer_tag_and_the_same_tag_need_no_flag(project: Path, tmp_path: Path) -> None:
    head = head_of(project)
    source = f"dir:{make_dir(tmp_path / 'next', next_tree(project), NEXT_TAG.removeprefix('v'))}"
    forward = run_release(project, "rebase", NEXT_TAG, "--from", source, "--report", str(tmp_path / "r"))
    assert forward.returncode == 0, forward.stderr
    assert "backwards" not in forward.stderr
    assert json.loads((tmp_path / "r" / "rebase-report.json").read_text())["direction"] == "forward"
    assert head_of(project) == NEXT_TAG != head
    same = run_release(project, "rebase", NEXT_TAG, "--from", source, "--report", str(tmp_path / "r"))
    assert same.returncode == 0, same.stderr
    again = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    assert (again["direction"], again["result"]) == ("same", "nothing-to-do")


def test_a_rerun_keeps_the_earlier_report_beside_the_new_one(project: Path, tmp_path: Path) -> None:
    """The issue's case: a second run answered "nothing-to-do" over the report of the run that did the work."""
    source = f"dir:{make_dir(tmp_path / 'next', next_tree(project), NEXT_TAG.removeprefix('v'))}"
    reports = tmp_path / "r"
    for _ in range(2):
        result = run_release(project, "rebase", NEXT_TAG, "--from", source, "--report", str(reports))
        assert result.returncode == 0, result.stderr
    first = json.loads((reports / "runs" / "0001" / "rebase-report.json").read_text())
    second = json.loads((reports / "runs" / "0002" / "rebase-report.json").read_text())
    assert (first["result"], second["result"]) == ("done", "nothing-to-do")
    assert (first["run"], first["earlier_runs"]) == ("runs/0001", [])
    assert (second["run"], second["earlier_runs"]) == ("runs/0002", ["runs/0001"])
    # The directory's own pair is the newest run, byte for byte.
    for name in ("rebase-report.json", "rebase-report.md"):
        assert (reports / name).read_bytes() == (reports / "runs" / "0002" / name).read_bytes()
    assert "earlier runs here: `runs/0001/`" in (reports / "rebase-report.md").read_text()
    assert "runs/0002/" in result.stderr


def test_a_report_from_before_numbered_runs_becomes_run_1(project: Path, tmp_path: Path) -> None:
    reports = tmp_path / "r"
    reports.mkdir()
    (reports / "rebase-report.json").write_text('{"result": "done"}\n')
    (reports / "rebase-report.md").write_text("# Rebase onto vLLM vX: done\n")
    source = f"dir:{make_dir(tmp_path / 'next', next_tree(project), NEXT_TAG.removeprefix('v'))}"
    result = run_release(project, "rebase", NEXT_TAG, "--from", source, "--dry-run", "--report", str(reports))
    assert result.returncode == 0, result.stderr
    assert (reports / "runs" / "0001" / "rebase-report.json").read_text() == '{"result": "done"}\n'
    assert json.loads((reports / "rebase-report.json").read_text())["run"] == "runs/0002"
