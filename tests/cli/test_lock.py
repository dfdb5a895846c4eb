"""Two writers never interleave: one repository lock, one index lock, a bounded wait, then exit 2.

The holder is a real process (this test's, through release.core.lock) or a second real CLI
run; the lock is the operating system's, so a killed holder frees it by itself. A wait setting that
is no number is tests/unit/test_lock.py's, through the same main() in one process.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO, run_release, snapshot
from helpers.index_stage import publish_index
from helpers.synthetic import NEXT_TAG, demo_wheel, make_dir, next_tree
from release.core.layout import Layout
from release.core.lock import TIMEOUT_ENV, index_lock, repo_lock

OTHER_TAG = NEXT_TAG.rsplit(".", 1)[0] + ".98"  # also newer than the head, older than NEXT_TAG


def _source(project: Path, root: Path, version: str, marker: bytes) -> str:
    tree = {name: marker + data for name, data in next_tree(project).items()}
    return f"dir:{make_dir(root, tree, version)}"


def test_a_second_writer_waits_then_refuses_with_exit_2_and_changes_nothing(project: Path, tmp_path: Path) -> None:
    source = _source(project, tmp_path / "src", NEXT_TAG.removeprefix("v"), b"")
    before = snapshot(project)
    with repo_lock(Layout(project), "a test holding the lock"):
        started = time.monotonic()
        result = run_release(project, "rebase", NEXT_TAG, "--from", source, env={TIMEOUT_ENV: "2"})
        waited = time.monotonic() - started
        built = run_release(project, "build", "--out", str(tmp_path / "dist"), env={TIMEOUT_ENV: "0"})
        checked = run_release(project, "check", env={TIMEOUT_ENV: "0"})
    assert result.returncode == 2, result.stderr
    assert f"`a test holding the lock` (pid {os.getpid()}) still holds the repository" in result.stderr
    assert "waiting up to 2 s" in result.stderr and waited >= 2
    assert built.returncode == 2 and "still holds the repository" in built.stderr, built.stderr
    assert not (tmp_path / "dist").exists()
    # A reader does not wait for a writer: it reads the tree as it is and says so.
    assert checked.returncode == 0 and "reading it as it is now" in checked.stderr, checked.stderr
    assert snapshot(project) == before


def test_two_rebases_at_once_run_one_after_the_other_and_leave_one_consistent_tree(
    project: Path, tmp_path: Path
) -> None:
    sources = {
        NEXT_TAG: _source(project, tmp_path / "a", NEXT_TAG.removeprefix("v"), b"# a\n"),
        OTHER_TAG: _source(project, tmp_path / "b", OTHER_TAG.removeprefix("v"), b"# b\n"),
    }
    env = {**os.environ, TIMEOUT_ENV: "240"}
    runs = {}
    with repo_lock(Layout(project), "the starting gun"):  # both start while the lock is held, then race
        for tag, source in sources.items():
            # Whichever runs second may go from NEXT_TAG back to OTHER_TAG: the race is the point here.
            rebase = ["rebase", tag, "--from", source, "--allow-older"]
            argv = [sys.executable, "-m", "release", "--root", str(project), *rebase]
            runs[tag] = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Each says that it waits before anything else (flushed); read it while the gun is still held,
        # so both are proven to be queued on the lock however slowly the machine starts them.
        waiting = {tag: proc.stderr.readline() for tag, proc in runs.items() if proc.stderr is not None}
    outputs = {tag: proc.communicate(timeout=300) for tag, proc in runs.items()}
    for tag, proc in runs.items():
        assert proc.returncode == 0, outputs[tag][1].decode()
        assert "waiting up to 240 s" in waiting[tag].decode(), waiting[tag]
    pin = (project / "vendor/vllm_fused_moe/UPSTREAM.toml").read_text()
    final = NEXT_TAG if f'tag = "{NEXT_TAG}"' in pin else OTHER_TAG
    assert f'tag = "{final}"' in pin
    marker = b"# a\n" if final == NEXT_TAG else b"# b\n"
    vendored = (project / "vendor/vllm_fused_moe/prepare_finalize/batched.py").read_bytes()
    assert vendored.startswith(marker)  # the subtree and the pin are of the same tag
    assert run_release(project, "check").returncode == 0


def test_a_killed_holder_frees_the_lock_by_itself(project: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path; from release.core.layout import Layout; "
        "from release.core.lock import repo_lock\n"
        f"with repo_lock(Layout(Path({str(project)!r})), 'doomed'):\n"
        "    print('held', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    refused = run_release(project, "build", "--out", str(project / "dist"), env={TIMEOUT_ENV: "0"})
    assert refused.returncode == 2 and "`doomed`" in refused.stderr, refused.stderr
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with repo_lock(Layout(project), "after the kill"):
        pass  # taken at once: no stale lock to remove by hand


def test_publish_holds_the_index_lock(tmp_path: Path) -> None:
    """The index stage, the part of publish that writes (helpers/index_stage.py: its gates refuse demo wheels)."""
    index = tmp_path / "index"
    index.mkdir()
    wheel = demo_wheel(tmp_path / "dist", "1.0")
    with index_lock(index, "another publish"):
        result = publish_index(wheel, index, env={TIMEOUT_ENV: "0"})
        # INDEX_DIR is served as it is: no file there names the holder, so the waiter cannot either.
        assert [p.name for p in index.iterdir()] == [".publish.lock"]
    assert result.returncode == 2 and f"another command still holds the index {index}" in result.stderr, result.stderr
    assert not (index / "simple").exists()
    assert publish_index(wheel, index).returncode == 0


@pytest.mark.parametrize(
    "args",
    [
        ("train", "remove", "{other}"),
        ("train", "add", "{other}"),
        ("build", "--all", "--out", "{dist}"),
        # scan writes docs/ and the runtime's JSON from what it read: refused before it lists or reads a release
        ("scan", "--since", "{other}", "--until", "{other}"),
    ],
    ids=["train-remove", "train-add", "build-all", "scan"],
)
def test_train_writers_build_all_and_scan_hold_the_repository_lock(
    project: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    train = (project / "patches" / "train.toml").read_text()
    head = (project / "vendor/vllm_fused_moe/UPSTREAM.toml").read_text()
    other = next(t for t in re.findall(r'tag = "(v[^"]+)"', train) if f'tag = "{t}"' not in head)
    argv = [a.format(other=other, dist=tmp_path / "dist") for a in args]
    before = snapshot(project)
    with repo_lock(Layout(project), "a test holding the lock"):
        result = run_release(project, *argv, env={TIMEOUT_ENV: "0"})
    assert result.returncode == 2, result.stderr
    assert "`a test holding the lock`" in result.stderr and "still holds the repository" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(project) == before
    assert not (tmp_path / "dist").exists()
