"""The repository and index locks, in this process: a writer that finds the lock held waits as long as it
is told, then refuses with exit 2 and changes nothing; a bad wait is bad input; the lock is re-entrant
within one process and free once its holder lets go.

The other holder is the OS lock itself, taken here through a second open file (as another process
holds it). Holders that are real processes, killed holders and two rebases racing: tests/cli/test_lock.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from helpers import snapshot, tag_facts
from helpers.failure import failed
from helpers.synthetic import demo_wheel
from helpers.train import load_train
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, BadInputError, LockedError
from release.core.layout import Layout
from release.core.lock import INDEX_LOCK, REPO_LOCK, TIMEOUT_ENV, index_lock, repo_lock
from release.overlay.build import PROJECT
from release.overlay.index import publish


def held_elsewhere(path: Path) -> FileLock:
    """The OS lock on `path` through another open file: to this process's lock code, another holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path), is_singleton=False)


def other_tag(project: Path) -> str:
    head = tag_facts.head().tag
    return next(tag for tag in reversed(load_train(Layout(project)).tags) if tag != head)


def test_a_writer_waits_as_long_as_it_is_told_then_refuses_and_changes_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = Layout(project)
    before = snapshot(project)
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    with held_elsewhere(layout.work / REPO_LOCK):
        started = time.monotonic()
        code = main(["--root", str(project), "train", "remove", other_tag(project)])
        waited = time.monotonic() - started
    err = capsys.readouterr().err.splitlines()
    assert code == EXIT_BAD_INPUT and waited >= 1, err
    assert err[0] == f"waiting up to 1 s for another command, which holds the repository {project} ..."
    error = failed("\n".join(err), project)
    assert error.reference == LockedError.reference and err[1].startswith(f"error[{LockedError.reference}]: ")
    assert error.shown.splitlines()[0].endswith(
        "still holds the repository [TMP] after [TIME]; train remove did nothing"
    )
    assert snapshot(project) == before


@pytest.mark.parametrize("value", ["soon", "1e999x"])
def test_a_wait_that_is_not_a_number_is_bad_input(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, value)
    before = snapshot(project)
    with held_elsewhere(Layout(project).work / REPO_LOCK):
        code = main(["--root", str(project), "train", "remove", other_tag(project)])
    error = failed(capsys.readouterr().err)
    assert code == EXIT_BAD_INPUT and error.reference == BadInputError.reference
    assert error.message == f"{TIMEOUT_ENV}={value!r} is not a number of seconds"
    assert snapshot(project) == before


def test_the_repository_lock_is_reentrant_and_free_once_let_go(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = Layout(project)
    monkeypatch.setenv(TIMEOUT_ENV, "0")
    other = held_elsewhere(layout.work / REPO_LOCK)
    # The inner one does not wait on the outer; another open file cannot have it meanwhile.
    with repo_lock(layout, "outer"), repo_lock(layout, "inner"), pytest.raises(Timeout):
        other.acquire(timeout=0)
    with other:
        pass  # taken at once: nothing stale to remove by hand


def test_publish_refuses_an_index_another_publish_holds_then_publishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index stage (release/overlay/index.py) under publish's gates: a demo wheel is no build of the checkout,
    which the command refuses first (tests/cli/test_publish_rebuild.py)."""
    index = tmp_path / "index"
    index.mkdir()
    wheel = demo_wheel(tmp_path / "dist", "1.0")
    monkeypatch.setenv(TIMEOUT_ENV, "0")
    with held_elsewhere(index / INDEX_LOCK), pytest.raises(LockedError) as refused:
        publish([wheel], index, project=PROJECT)
    assert f"still holds the index {index}" in str(refused.value) and refused.value.exit_code == EXIT_BAD_INPUT
    assert not (index / "simple").exists()
    publish([wheel], index, project=PROJECT)
    assert (index / "simple" / "vllm-fused-moe" / wheel.name).read_bytes() == wheel.read_bytes()
    with index_lock(index, "after"):
        pass


def test_publish_reads_the_checkout_as_it_is_while_a_writer_holds_it(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # publish reads the records it holds each wheel to under the repository lock, as a reader: it never waits.
    wheel = demo_wheel(tmp_path / "dist", "1.0")
    monkeypatch.setenv(TIMEOUT_ENV, "60")
    with held_elsewhere(Layout(project).work / REPO_LOCK):
        code = main(["--root", str(project), "publish", str(wheel), str(tmp_path / "index")])
    err = capsys.readouterr().err
    # The demo wheel is no build of the checkout: refused after the checkout was read, without waiting for it.
    assert code == EXIT_BAD_INPUT and "reading it as it is now" in err and "waiting" not in err, err
    assert "no build facts" in err, err
