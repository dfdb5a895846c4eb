"""release.cli.main in this process: each kind of failure is one `error[REFERENCE]:` line, one `hint:` line and its
exit code, and a command that refuses changes nothing.

The commands here decide without git, a source or the network (the same commands as processes,
and the ones that need those: tests/cli/, tests/e2e/). The project is a copy of vendor/ and patches/.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import snapshot, tag_facts
from helpers.failure import Failure, failed
from helpers.ls_remote import LS_REMOTE
from helpers.train import load_train
from release.cli import main
from release.core import errors
from release.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from release.core.journal import temporary_name
from release.core.layout import Layout


def run(project: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, list[str]]:
    """Exit code, stdout and stderr's lines of `python -m release --root PROJECT ARGS`, in this process."""
    code = main(["--root", str(project), *args])
    said = capsys.readouterr()
    return code, said.out, said.err.splitlines()


def one_error(lines: list[str]) -> Failure:
    """The failure, asserting that stderr is its error line and its hint line and nothing else."""
    failure = failed("\n".join(lines))
    assert len(lines) == 2 and failure.hint, lines
    return failure


def other_train_tag(project: Path) -> str:
    head = tag_facts.head().tag
    return next(tag for tag in reversed(load_train(Layout(project)).tags) if tag != head)


def bad_input_cases() -> list[tuple[list[str], type[errors.ReleaseError], str]]:
    """(the arguments, the kind of the refusal, what tells it from the other refusals of that kind)."""
    head, outside = tag_facts.head().tag, tag_facts.on_no_line()
    return [
        (["train", "add", "nightly"], errors.UnknownTagError, "'nightly'"),
        (["train", "add"], errors.BadInputError, "`train add` takes TAG... or --all"),
        (["train", "add", "--all", "--from", "pypi"], errors.BadInputError, "it takes no --from"),
        (["train", "add", head, head], errors.BadInputError, f"a tag is named twice: {head} {head}"),
        (["train", "remove", head], errors.BadInputError, f"{head} is the head of the train"),
        (["train", "remove", outside], errors.UnknownTrainTagError, outside),
        (["train", "check", outside], errors.UnknownTrainTagError, outside),
        (["scan", "--since", "banana"], errors.BadTagError, "'banana' is not a vLLM release"),
        (["scan", "--until", "v0.22.0rc1"], errors.BadTagError, "is a pre-release"),
        (["rebase", "v0.20", "--from", "pypi"], errors.UnknownTagError, "'v0.20'"),
        (["rebase", "", "--from", "pypi"], errors.BadInputError, "rebase needs a TAG"),
    ]


@pytest.mark.parametrize(("args", "kind", "message"), bad_input_cases(), ids=lambda value: str(value)[:40])
def test_bad_input_is_exit_2_one_error_and_one_hint_and_changes_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], kind: type[errors.ReleaseError], message: str
) -> None:
    before = snapshot(project)
    code, out, err = run(project, capsys, *args)
    error = one_error(err)
    assert code == EXIT_BAD_INPUT and error.reference == kind.reference and out == "", (code, err)
    assert message in error.message, err
    assert snapshot(project) == before and not (project / "docs").exists()


def test_tags_reads_a_recorded_listing_and_refuses_a_pin_that_is_no_release(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = tmp_path / "ls-remote.txt"
    recorded.write_text(LS_REMOTE)
    code, out, _ = run(project, capsys, "tags", "--ls-remote-output", str(recorded), "--newest", "--pin", "v0.20.0")
    assert (code, out) == (EXIT_OK, "v0.22.0\n")
    code, out, err = run(project, capsys, "tags", "--ls-remote-output", str(recorded), "--pin", "v0.21.0rc1")
    error = one_error(err)
    assert code == EXIT_BAD_INPUT and error.reference == errors.BadTagError.reference and out == ""
    assert "'v0.21.0rc1'" in error.message


def test_list_names_every_tag_and_marks_the_head(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tags, head = load_train(Layout(project)).tags, tag_facts.head().tag
    code, out, _ = run(project, capsys, "train", "list")
    assert code == EXIT_OK
    assert [line.split()[0] for line in out.splitlines()[1:] if line.startswith("v")] == tags
    assert f"{head} *" in out
    code, out, _ = run(project, capsys, "train", "list", "--json")
    data = json.loads(out)
    assert code == EXIT_OK and data["head"] == head and [row["tag"] for row in data["releases"]] == tags


def test_remove_drops_only_that_entry(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = Layout(project)
    tag, before = other_train_tag(project), load_train(layout)
    code, _, err = run(project, capsys, "train", "remove", tag)
    assert code == EXIT_OK, err
    after = load_train(layout)
    assert after.tags == [t for t in before.tags if t != tag]
    assert list(after.entries) == [e for e in before.entries if e.tag != tag]
    assert layout.train.read_text() == before.without(tag).dumps()


def test_remove_takes_many_tags_in_one_write_or_none(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = Layout(project)
    before, head = load_train(layout), tag_facts.head().tag
    gone = [t for t in before.tags if t != head][:3]
    snap = snapshot(project)
    code, _, err = run(project, capsys, "train", "remove", *gone, head)  # the head among them: none removed
    error = one_error(err)
    assert code == EXIT_BAD_INPUT and f"{head} is the head of the train" in error.message and snapshot(project) == snap
    code, _, err = run(project, capsys, "train", "remove", *gone)
    assert code == EXIT_OK, err
    expected = before
    for tag in gone:
        expected = expected.without(tag)
    assert layout.train.read_text() == expected.dumps()
    assert load_train(layout).tags == [t for t in before.tags if t not in gone]


def test_a_damaged_rebase_state_is_one_line_and_abort_still_works(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = project / ".work" / "rebase-v0.20.99"
    work.mkdir(parents=True)
    (work / "state.json").write_text('{"tag": "v0.20.99", "sour')
    before = snapshot(project)
    code, _, err = run(project, capsys, "rebase", "--continue", str(work))
    error = one_error(err)
    assert code == EXIT_BAD_INPUT and error.reference == errors.WorkDirError.reference and "--abort" in error.hint, err
    assert "is damaged" in error.message, err  # not another work-dir refusal (no conflict to continue, ...)
    code, _, err = run(project, capsys, "rebase", "--abort", str(work))
    assert code == EXIT_OK and not work.exists(), err
    assert snapshot(project) == before


def test_the_disk_saying_no_is_exit_1_in_one_line_and_the_train_file_stays(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A directory where `train remove` writes its temporary copy of train.toml (this process's pid:
    # the command runs in it): the write fails with an OSError from the file system, not a ReleaseError.
    train = Layout(project).train
    original = train.read_bytes()
    temporary_name(train).mkdir()
    code, out, err = run(project, capsys, "train", "remove", other_train_tag(project))
    error = one_error(err)
    assert code == EXIT_FAILED and out == "" and error.reference == errors.DiskError.reference, err
    assert error.message == f"Is a directory ({temporary_name(train)})"
    assert "docs/guarantees.md" in error.hint
    assert train.read_bytes() == original


def test_ctrl_c_is_exit_130_with_one_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real SIGINT while `train remove` waits for the repository lock (held here through a second
    open file, as another process would hold it)."""
    from filelock import FileLock

    from release.core.lock import REPO_LOCK, TIMEOUT_ENV

    layout = Layout(project)
    layout.work.mkdir(parents=True, exist_ok=True)
    before = snapshot(project)

    def interrupt_once_waiting() -> None:
        # Only once the command says it waits: the signal must land inside main's try, not before it.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # capsys's buffer, pytest's CaptureIO, which sys.stderr's type (TextIO) does not name
            if "waiting up to" in sys.stderr.getvalue():  # type: ignore[union-attr]
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.02)

    held = FileLock(str(layout.work / REPO_LOCK), is_singleton=False)
    # A background job of a non-interactive shell starts with SIGINT ignored, and Python keeps it so:
    # the handler a terminal's Ctrl-C meets is Python's own, whoever started pytest.
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    with held, pytest.MonkeyPatch.context() as patch:
        patch.setenv(TIMEOUT_ENV, "120")
        signaller = threading.Thread(target=interrupt_once_waiting, daemon=True)
        signaller.start()
        try:
            code, _out, err = run(project, capsys, "train", "remove", other_train_tag(project))
        finally:
            signal.signal(signal.SIGINT, ignored)
        signaller.join()
    assert code == EXIT_INTERRUPTED, err
    assert err[-1].startswith("interrupted; vendor/ and patches/ are only ever changed in one journaled swap"), err
    assert snapshot(project) == before
