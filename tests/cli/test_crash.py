"""Crash at any instant, lose nothing: `rebase`, `publish` and `build` killed by SIGKILL after every write step.

Each run is the real CLI in a real process that kills itself at one named step
(release/core/faults.py: VLLM_FUSED_MOE_FAULT). Then `check` runs, and the next command:
the tree must be byte for byte the old one or the new one (never a mix), the next command
must finish the job, and whatever it had to finish or clean up, it says so.
The upstream source is offline (tests/helpers/synthetic.py); the wheels are tiny real wheels.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import REPO, run_release, snapshot, work_leftovers
from helpers.index_stage import publish_index
from helpers.synthetic import NEXT_TAG, SUBTREE, add_patch, demo_wheel, make_dir, next_tree
from release.core.faults import ATOMIC_STEPS, FAULT_ENV, PUBLISH_STEPS, REBASE_STEPS
from release.overlay.repair import check_consistent
from release.overlay.wheel import WheelReads

# The swap has three outputs here (subtree, patches/, UPSTREAM.toml): each rename of each is a step.
SWAP = [f"swap:{what}@{n}" for n in (1, 2, 3) for what in ("moved-old", "moved-new")]
REBASE_KILLS = [
    "rebase:work-dir",
    "rebase:replayed",
    "swap:staged",
    "swap:journal",
    *SWAP,
    "swap:discarded",
    "swap:done",
    "rebase:swapped",
]
# Before the journal exists a kill leaves the old tree; from the journal on, the new one.
OLD_AFTER = {"rebase:work-dir", "rebase:replayed", "swap:staged"}
JOURNAL_PENDING = {"swap:journal", *SWAP, "swap:discarded"}
# `build` delivers each wheel into --out with copy_atomic (release/core/journal.py).
BUILD_KILLS = ["atomic:written", "atomic:renamed"]
PUBLISH_KILLS = [
    "publish:dirs",
    "publish:copied",
    "publish:page-written@1",
    "publish:page-written@2",
    "publish:renamed@1",
    "publish:renamed@2",
    "publish:requirements-written",
    "publish:renamed@3",  # the wheel and both pages in place, the requirements file not yet
    "publish:renamed@4",  # the requirements file in place: all done
]


def _copy_project(root: Path) -> Path:
    root.mkdir(parents=True)
    for name in ("vendor", "patches", "release/overlay/runtime"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> str:
    # One source path for the module, so that every pin written from it is the same bytes.
    base = tmp_path_factory.mktemp("crash-src")
    project = _copy_project(base / "seed")
    return f"dir:{make_dir(base / 'src', next_tree(project), NEXT_TAG.removeprefix('v'))}"


@pytest.fixture(scope="module")
def after(tmp_path_factory: pytest.TempPathFactory, source: str) -> dict[str, bytes]:
    """The tree a rebase that nobody killed leaves."""
    project = _copy_project(tmp_path_factory.mktemp("crash-ref") / "project")
    result = run_release(project, "rebase", NEXT_TAG, "--from", source)
    assert result.returncode == 0, result.stderr
    return snapshot(project)


def test_every_write_step_is_killed_by_some_test() -> None:
    killed = {step.split("@")[0] for step in [*REBASE_KILLS, *PUBLISH_KILLS, *BUILD_KILLS, "rebase:state"]}
    assert killed == set(REBASE_STEPS) | set(PUBLISH_STEPS) | set(ATOMIC_STEPS)


@pytest.mark.parametrize("step", REBASE_KILLS)
def test_rebase_killed_at_any_step_leaves_old_or_new_and_the_next_command_finishes(
    tmp_path: Path, source: str, after: dict[str, bytes], step: str
) -> None:
    project = _copy_project(tmp_path / "project")
    before = snapshot(project)
    assert before != after
    killed = run_release(project, "rebase", NEXT_TAG, "--from", source, env={FAULT_ENV: step})
    assert killed.returncode == -9, (step, killed.stderr)

    checked = run_release(project, "check")
    assert checked.returncode == 0, (step, checked.stdout, checked.stderr)
    assert snapshot(project) == (before if step in OLD_AFTER else after), step
    if step in JOURNAL_PENDING:
        assert "note: finished an interrupted swap" in checked.stderr, checked.stderr
    if step == "swap:staged":
        assert "note: removed a half-staged swap" in checked.stderr, checked.stderr

    again = run_release(project, "rebase", NEXT_TAG, "--from", source)
    assert again.returncode == 0, (step, again.stderr)
    if step in OLD_AFTER:
        assert "killed before it stopped at a conflict" in again.stderr, again.stderr
    assert snapshot(project) == after
    assert work_leftovers(project) == []
    assert run_release(project, "check").returncode == 0


# ---------------------------------------------------------------- conflict path

PATCH = "0002-mori-ours.patch"
LATER = "0003-batched-later.patch"
RESOLVED = "import torch  # ours, and upstream's reason\n"


def _conflict_project(root: Path) -> Path:
    project = _copy_project(root)
    add_patch(project, PATCH, "mori.py", "import torch\n", "import torch  # ours\n", "mori: ours")
    add_patch(project, LATER, "batched.py", "import torch\n", "import torch  # later\n", "batched: later")
    return project


@pytest.fixture(scope="module")
def conflict_source(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("conflict-src")
    tree = next_tree(_conflict_project(base / "seed"))
    tree["mori.py"] = tree["mori.py"].replace(b"import torch\n", b"import torch  # upstream\n", 1)
    return f"dir:{make_dir(base / 'src', tree, NEXT_TAG.removeprefix('v'))}"


def _stop_and_resolve(project: Path, source: str) -> Path:
    stopped = run_release(project, "rebase", NEXT_TAG, "--from", source)
    assert stopped.returncode == 3, stopped.stderr
    work = project / ".work" / f"rebase-{NEXT_TAG}"
    conflicted = work / "repo" / SUBTREE / "mori.py"
    lines, skipping = [], False
    for line in conflicted.read_text().splitlines(keepends=True):
        if line.startswith("<<<<<<<"):
            skipping = True
        elif line.startswith(">>>>>>>"):
            skipping = False
            lines.append(RESOLVED)
        elif not skipping:
            lines.append(line)
    conflicted.write_text("".join(lines))
    subprocess.run(["git", "-C", str(work / "repo"), "add", "--all"], check=True)
    return work


@pytest.fixture(scope="module")
def resolved_after(tmp_path_factory: pytest.TempPathFactory, conflict_source: str) -> dict[str, bytes]:
    project = _conflict_project(tmp_path_factory.mktemp("conflict-ref") / "project")
    work = _stop_and_resolve(project, conflict_source)
    done = run_release(project, "rebase", "--continue", str(work))
    assert done.returncode == 0, done.stderr
    return snapshot(project)


def test_rebase_killed_when_it_records_a_conflict_keeps_a_conflict_to_continue_or_abort(
    tmp_path: Path, conflict_source: str
) -> None:
    project = _conflict_project(tmp_path / "project")
    before = snapshot(project)
    killed = run_release(project, "rebase", NEXT_TAG, "--from", conflict_source, env={FAULT_ENV: "rebase:state"})
    assert killed.returncode == -9
    assert run_release(project, "check").returncode == 0 and snapshot(project) == before
    again = run_release(project, "rebase", NEXT_TAG, "--from", conflict_source)
    assert again.returncode == 2 and "--continue" in again.stderr and "--abort" in again.stderr, again.stderr
    work = project / ".work" / f"rebase-{NEXT_TAG}"
    assert run_release(project, "rebase", "--abort", str(work)).returncode == 0
    assert run_release(project, "rebase", NEXT_TAG, "--from", conflict_source).returncode == 3
    assert snapshot(project) == before


@pytest.mark.parametrize("step", ["rebase:replayed", "swap:staged", "swap:journal", "swap:moved-new@2", "swap:done"])
def test_continue_killed_at_any_step_is_finished_by_the_next_command(
    tmp_path: Path, conflict_source: str, resolved_after: dict[str, bytes], step: str
) -> None:
    project = _conflict_project(tmp_path / "project")
    before = snapshot(project)
    work = _stop_and_resolve(project, conflict_source)
    killed = run_release(project, "rebase", "--continue", str(work), env={FAULT_ENV: step})
    assert killed.returncode == -9, killed.stderr
    assert run_release(project, "check").returncode == 0
    if step in OLD_AFTER:
        assert snapshot(project) == before
        done = run_release(project, "rebase", "--continue", str(work))
        assert done.returncode == 0, done.stderr
    assert snapshot(project) == resolved_after
    assert not work.exists() and work_leftovers(project) == []


# ---------------------------------------------------------------------- publish


def _index_state(index: Path) -> dict[str, bytes]:
    return {
        p.relative_to(index).as_posix(): p.read_bytes()
        for p in sorted(index.rglob("*"))
        if p.is_file() and not p.name.startswith(".publish.lock")
    }


def test_publish_killed_at_any_step_is_finished_by_the_rerun(tmp_path: Path) -> None:
    """The index stage, the part of publish that writes (helpers/index_stage.py: its gates refuse demo wheels)."""
    old, new = demo_wheel(tmp_path / "dist", "1.0"), demo_wheel(tmp_path / "dist", "2.0")
    reference = tmp_path / "reference"
    for wheel in (old, new):
        assert publish_index(wheel, reference).returncode == 0
    expected = _index_state(reference)
    for step in PUBLISH_KILLS:
        index = tmp_path / step.replace(":", "-").replace("@", "-")
        assert publish_index(old, index).returncode == 0
        killed = publish_index(new, index, env={FAULT_ENV: step})
        assert killed.returncode == -9, (step, killed.stderr)
        again = publish_index(new, index)
        assert again.returncode == 0, (step, again.stderr)
        assert "Traceback" not in again.stderr
        if step not in ("publish:dirs", "publish:renamed@4"):  # those left nothing to clean up
            assert "note: " in again.stderr, (step, again.stderr)  # it says what it repaired or removed
        assert _index_state(index) == expected, step
        check_consistent(index / "simple" / "vllm-fused-moe", WheelReads())
        quiet = publish_index(new, index)
        assert quiet.returncode == 0 and "note:" not in quiet.stderr, quiet.stderr


# ------------------------------------------------------------------------ build

# Two SOURCE_DATE_EPOCHs give one wheel name with two contents: a good wheel already in --out,
# and the one a new build brings (the zip times differ).
OLD_EPOCH, NEW_EPOCH = "1600000000", "1700000000"


def _hidden(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("step", BUILD_KILLS)
def test_build_killed_while_delivering_leaves_the_old_wheel_or_the_new_never_a_part(tmp_path: Path, step: str) -> None:
    project = _copy_project(tmp_path / "project")
    reference, out = tmp_path / "reference", tmp_path / "dist"
    for where, epoch in ((reference, NEW_EPOCH), (out, OLD_EPOCH)):
        built = run_release(project, "build", "--out", str(where), env={"SOURCE_DATE_EPOCH": epoch})
        assert built.returncode == 0, built.stderr
    [wheel] = [p.name for p in reference.glob("*.whl")]
    old, new = (out / wheel).read_bytes(), (reference / wheel).read_bytes()
    assert old != new

    killed = run_release(project, "build", "--out", str(out), env={"SOURCE_DATE_EPOCH": NEW_EPOCH, FAULT_ENV: step})
    assert killed.returncode == -9, (step, killed.stderr)
    # Under the final name: the good wheel that was there (killed before the rename) or the whole new one.
    assert (out / wheel).read_bytes() == (old if step == "atomic:written" else new), step
    assert [p.name for p in out.glob("*.whl")] == [wheel]  # what pip --find-links and `publish dist` see
    leftovers = _hidden(out)
    if step == "atomic:written":
        # The copy under its temporary name: hidden, and not a `*.whl`.
        assert len(leftovers) == 1 and leftovers[0].startswith(f".{wheel}.tmp-"), leftovers
    else:
        assert leftovers == []

    again = run_release(project, "build", "--out", str(out), env={"SOURCE_DATE_EPOCH": NEW_EPOCH})
    assert again.returncode == 0, again.stderr
    assert (out / wheel).read_bytes() == new and _hidden(out) == []
    if leftovers:
        assert f"note: removed {out / leftovers[0]}, the partial copy of a killed build" in again.stderr, again.stderr
    else:
        assert "note:" not in again.stderr
