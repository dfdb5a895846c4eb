"""Every file the tool reads goes through one reader (release/core/files.py): a FIFO, /dev/zero or a
link to either, named on the command line or committed in place of one of the checkout's files, is
refused at once with exit 2 and one error line, never a hang or an exhausted memory.

The commands run in this process (`main`); each test has a deadline, so a reader that waits for a
FIFO's writer fails the test instead of hanging the run. A deep nesting in a TOML or JSON file is
the same: one error line, exit 2, no RecursionError.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.failure import failed
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT
from release.core.layout import Layout

pytestmark = pytest.mark.timeout(60)

SPECIAL = ["fifo", "link-to-dev-zero", "link-to-fifo"]


def make_special(path: Path, kind: str) -> None:
    """`path` (removed first) as a FIFO, a link to /dev/zero, or a link to a FIFO beside it."""
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    else:
        fifo = path.with_name(path.name + ".fifo")
        os.mkfifo(fifo)
        path.symlink_to(fifo)


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The message of the one error of `main(argv)`, which exits 2: what it says is the point here, whichever
    reader (so whichever kind of error) meets the file first."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and "Traceback" not in err, (code, err)
    return failed(err).message


# What `python -m release ARGS` names on its command line: ARGS with {} for the special file.
NAMED = [
    pytest.param(["train", "watch", "{}"], id="train-watch"),
    pytest.param(["doctor", "--python", sys.executable, "--scan", "{}"], id="doctor-scan"),
    pytest.param(["tags", "--ls-remote-output", "{}"], id="tags-ls-remote-output"),
]


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("args", NAMED)
def test_a_named_file_that_is_no_regular_file_is_refused(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], kind: str
) -> None:
    special = tmp_path / "named.json"
    make_special(special, kind)
    error = refused(capsys, "--root", str(project), *(a.replace("{}", str(special)) for a in args))
    assert "not a regular file" in error, error


# The checkout's own files, committed as a link or a FIFO: `check` reads each of them.
CHECKOUT: list[tuple[str, Callable[[Layout], Path]]] = [
    ("series", lambda layout: layout.series),
    ("lines.toml", lambda layout: layout.lines),
    ("train.toml", lambda layout: layout.train),
    ("UPSTREAM.toml", lambda layout: layout.upstream_toml),
    ("a line's series", lambda layout: layout.patches / "lines" / "flashinfer_a2a" / "series"),
    ("the scan data", lambda layout: layout.affected_json),
]


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize(("name", "where"), CHECKOUT, ids=[name for name, _ in CHECKOUT])
def test_a_checkout_file_that_is_no_regular_file_is_refused_by_check(
    project: Path, capsys: pytest.CaptureFixture[str], name: str, where: Callable[[Layout], Path], kind: str
) -> None:
    path = where(Layout(project))
    make_special(path, kind)
    error = refused(capsys, "--root", str(project), "check")
    assert str(path) in error and "not a regular file" in error, (name, error)


DEEP = 5000  # far past Python's recursion limit (1000), a few kB of text


@pytest.mark.parametrize(
    ("name", "where", "text"),
    [
        ("train.toml", lambda layout: layout.train, "x = " + "[" * DEEP + "]" * DEEP + "\n"),
        ("lines.toml", lambda layout: layout.lines, "x = " + "[" * DEEP + "]" * DEEP + "\n"),
        ("UPSTREAM.toml", lambda layout: layout.upstream_toml, "x = " + "{a = " * DEEP + "1" + "}" * DEEP + "\n"),
    ],
    ids=["train", "lines", "upstream"],
)
def test_a_deeply_nested_toml_file_is_bad_input(
    project: Path, capsys: pytest.CaptureFixture[str], name: str, where: Callable[[Layout], Path], text: str
) -> None:
    where(Layout(project)).write_text(text)
    error = refused(capsys, "--root", str(project), "check")
    assert "nested too deeply" in error, (name, error)


def test_a_deeply_nested_scan_document_is_bad_input(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scan = tmp_path / "scan.json"
    scan.write_text("[" * DEEP + "]" * DEEP)
    error = refused(capsys, "--root", str(project), "train", "watch", str(scan))
    assert "nested too deeply" in error, error


def test_deep_nesting_in_the_tool_s_own_state_is_one_error(project: Path, tmp_path: Path) -> None:
    """The swap journal, VERIFIED.toml and the scan data: each reader says what is wrong, no RecursionError."""
    from release.core.errors import ConfigError, JournalError
    from release.core.journal import JOURNAL, recover, swap_dir
    from release.queue.verified import read_verified

    layout = Layout(project)
    swap = swap_dir(layout)
    swap.mkdir(parents=True)
    (swap / JOURNAL).write_text("[" * DEEP + "]" * DEEP)
    with pytest.raises(JournalError, match="nested too deeply"):
        recover(layout)
    verified = tmp_path / "VERIFIED.toml"
    verified.write_text("x = " + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        read_verified(verified)
