"""The conflict path as docs/maintainers.md walks it, offline, on vLLM's own files.

Patch 0002 changes a line of mori.py; the next tag (tests/helpers/synthetic.py) changes the same
line otherwise, or deletes the file. The maintainer's commands are the documented ones,
run from the checkout with the relative work-directory path the docs print.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, snapshot, work_leftovers
from helpers.synthetic import NEXT_TAG, SUBTREE, add_patch, make_dir, next_tree
from release.model.series import Series

PATCH = "0002-mori-ours.patch"
LATER = "0003-batched-later.patch"
OURS = "import torch  # ours: keep torch first\n"
UPSTREAM = "import torch  # upstream's own reason\n"
WORK = f".work/rebase-{NEXT_TAG}"


def release_here(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m release ARGS` run from inside the checkout, as a maintainer types it."""
    return subprocess.run(
        [sys.executable, "-m", "release", "--root", ".", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )


def git(project: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(project / WORK / "repo"), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def conflicted(project: Path, tmp_path: Path) -> Path:
    """The project stopped at a conflict of patch 0002 against the next tag; 0003 is still to replay."""
    add_patch(project, PATCH, "mori.py", "import torch\n", OURS, "mori: ours")
    add_patch(project, LATER, "batched.py", "import torch\n", "import torch  # later\n", "batched: later")
    tree = next_tree(project)
    tree["mori.py"] = tree["mori.py"].replace(b"import torch\n", UPSTREAM.encode(), 1)
    source = make_dir(tmp_path / "src", tree, NEXT_TAG.removeprefix("v"))
    result = release_here(project, "rebase", NEXT_TAG, "--from", f"dir:{source}", "--report", "reports/r")
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    return project


def _resolve(project: Path, line: str) -> None:
    path = project / WORK / "repo" / SUBTREE / "mori.py"
    kept, side = [], None
    for text in path.read_text().splitlines(keepends=True):
        if text.startswith("<<<<<<<"):
            side = "ours"
        elif text.startswith(("|||||||", "=======")) and side:
            side = "skip"
        elif text.startswith(">>>>>>>"):
            side = None
            kept.append(line)
        elif side is None:
            kept.append(text)
    path.write_text("".join(kept))
    git(project, "add", f"{SUBTREE}/mori.py")


def test_continue_with_the_relative_work_dir_the_docs_print(conflicted: Path) -> None:
    project = conflicted
    both = "import torch  # ours, and upstream's reason\n"
    _resolve(project, both)
    done = release_here(project, "rebase", "--continue", WORK)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert both in (project / "vendor/vllm_fused_moe/prepare_finalize/mori.py").read_text()
    assert f"+{both}" in (project / "patches" / PATCH).read_text()
    assert "import torch  # later" in (project / "vendor/vllm_fused_moe/prepare_finalize/batched.py").read_text()
    report = json.loads((project / "reports/r/rebase-report.json").read_text())
    assert [(p["name"], p["status"]) for p in report["patches"]][1:] == [(PATCH, "applies"), (LATER, "applies")]
    assert not (project / WORK).exists() and work_leftovers(project) == []
    assert release_here(project, "check").returncode == 0


def test_resolving_to_upstreams_version_retires_the_patch(conflicted: Path) -> None:
    project = conflicted
    _resolve(project, UPSTREAM)  # what upstream has: our patch has nothing left to say
    done = release_here(project, "rebase", "--continue", WORK)
    assert done.returncode == 0, done.stderr
    report = json.loads((project / "reports/r/rebase-report.json").read_text())
    assert {p["name"]: p["status"] for p in report["patches"]}[PATCH] == "upstream"
    assert "resolved to upstream's version" in {p["name"]: p["how"] for p in report["patches"]}[PATCH]
    assert not (project / "patches" / PATCH).exists()
    assert f"\nApplied-Upstream: {NEXT_TAG}\n" in (project / "patches/retired" / PATCH).read_text()
    # Out of the series the head applies, kept in its place for the tags before NEXT_TAG (docs/patch-queue.md).
    assert Series.load(project / "patches/series").retired == [PATCH]
    assert PATCH not in Series.load(project / "patches/series").names
    assert UPSTREAM in (project / "vendor/vllm_fused_moe/prepare_finalize/mori.py").read_text()
    assert release_here(project, "check").returncode == 0


def test_git_am_skip_by_hand_also_retires_the_patch(conflicted: Path) -> None:
    project = conflicted
    git(project, "am", "--skip")  # what git's own "No changes" message suggests
    done = release_here(project, "rebase", "--continue", WORK)
    assert done.returncode == 0, done.stderr
    assert (project / "patches/retired" / PATCH).is_file()
    assert release_here(project, "check").returncode == 0


def test_an_unresolved_conflict_says_so_and_keeps_the_state(conflicted: Path) -> None:
    project = conflicted
    before = snapshot(project)
    again = release_here(project, "rebase", "--continue", WORK)
    assert again.returncode == 3 and "still unresolved" in again.stderr, again.stderr
    assert snapshot(project) == before and (project / WORK / "state.json").is_file()


def test_continue_refuses_a_directory_that_is_not_a_rebase_work_dir(conflicted: Path, tmp_path: Path) -> None:
    for bad in (str(tmp_path), "vendor", ".work"):
        result = release_here(conflicted, "rebase", "--abort", bad)
        assert result.returncode == 2 and "is not a rebase work directory" in result.stderr, result.stderr
    assert (conflicted / "vendor").is_dir() and (conflicted / WORK / "state.json").is_file()


def test_a_patch_whose_file_the_new_tag_deleted_says_it_is_absent(project: Path, tmp_path: Path) -> None:
    add_patch(project, PATCH, "mori.py", "import torch\n", OURS, "mori: ours")
    tree = next_tree(project)
    del tree["mori.py"]
    source = make_dir(tmp_path / "src", tree, NEXT_TAG.removeprefix("v"))
    before = snapshot(project)
    result = release_here(project, "rebase", NEXT_TAG, "--from", f"dir:{source}", "--report", "reports/r")
    assert result.returncode == 3, result.stderr
    assert snapshot(project) == before
    report = json.loads((project / "reports/r/rebase-report.json").read_text())
    stopped = next(p for p in report["patches"] if p["name"] == PATCH)
    assert f"absent in vLLM {NEXT_TAG}" in stopped["how"] and "mori.py" in stopped["how"]
    conflict = stopped["conflicts"][0]
    assert conflict["file"] == f"{SUBTREE}/mori.py"
    assert f"absent in vLLM {NEXT_TAG}" in conflict["ours"]
    assert "+import torch  # ours" in conflict["theirs"]
    assert f"absent in vLLM {NEXT_TAG}" in (project / "reports/r/rebase-report.md").read_text()


def test_a_dry_run_that_meets_a_conflict_reports_it_and_leaves_nothing(project: Path, tmp_path: Path) -> None:
    """`rebase TAG --dry-run` writes only the report: no work directory (so no --abort), and the real
    rebase onto the same tag can start at once."""
    add_patch(project, PATCH, "mori.py", "import torch\n", OURS, "mori: ours")
    tree = next_tree(project)
    tree["mori.py"] = tree["mori.py"].replace(b"import torch\n", UPSTREAM.encode(), 1)
    source = make_dir(tmp_path / "src", tree, NEXT_TAG.removeprefix("v"))
    before = snapshot(project)
    dry = release_here(project, "rebase", NEXT_TAG, "--from", f"dir:{source}", "--dry-run", "--report", "reports/r")
    assert dry.returncode == 3, dry.stderr
    report = json.loads((project / "reports" / "r" / "rebase-report.json").read_text())
    assert report["result"] == "conflict" and report["work_dir"] == "", report
    assert [c["file"] for o in report["patches"] for c in o.get("conflicts", [])] == [f"{SUBTREE}/mori.py"]
    assert not (project / WORK).exists() and snapshot(project) == before
    again = release_here(project, "rebase", NEXT_TAG, "--from", f"dir:{source}", "--report", "reports/r")
    assert again.returncode == 3 and "already in progress" not in again.stderr, again.stderr
