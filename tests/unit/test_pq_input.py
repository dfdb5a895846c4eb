"""What the patch-queue commands take from the command line and from patches/: bad input is exit 2 at once.

A series is read as the tool writes it (LF line ends, no control character), so `check`, `pq import`
and `pq export` refuse a CRLF series or one with an ESC instead of rewriting it without a word; `pq
skip --reason` cannot write one. A slug longer than a file name may be, a --report or --dir that
cannot be a directory: refused before any work, as `rebase --report` is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import snapshot
from helpers.failure import failed
from helpers.fix import fix_patch
from release.cli import main
from release.core.errors import (
    EXIT_BAD_INPUT,
    BadInputError,
    MalformedSeriesError,
    OutputNotWritableError,
    PatchQueueTreeError,
)
from release.core.layout import Layout
from release.model.series import Series
from release.pq.names import SLUG_LENGTH

LINE = "flashinfer_a2a"
FIX = fix_patch().name


@pytest.mark.parametrize(
    ("spoil", "problem"),
    [
        (lambda text: text.replace("\n", "\r\n"), "has CRLF line ends (a CR); a series is written with LF line ends"),
        (lambda text: text.replace("# One file", "# \x1b[2J One file"), "holds the control character U+001B"),
    ],
    ids=["crlf", "esc"],
)
def test_a_series_the_tool_would_not_write_is_refused(project: Path, spoil: Callable[[str], str], problem: str) -> None:
    path = Layout(project).patches / "series"
    path.write_bytes(spoil(path.read_text()).encode())
    with pytest.raises(MalformedSeriesError) as refused:
        Series.load(path)
    assert str(refused.value).endswith(problem), refused.value
    assert refused.value.exit_code == EXIT_BAD_INPUT


def test_pq_skip_writes_no_control_character(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = Layout(project)
    series = layout.patches / "lines" / LINE / "series"
    series.write_text("".join(line for line in series.read_text().splitlines(True) if not line[0].isdigit()))
    before = snapshot(project)
    argv = ["pq", "skip", fix_patch(project).name, "--line", LINE, "--reason", "not \x1b[31mneeded"]
    code = main(["--root", str(project), *argv])
    assert code == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == BadInputError.reference
    assert error.message == "--reason holds the control character U+001B: a skip needs a reason in words"
    assert snapshot(project) == before


def test_pq_new_refuses_a_slug_longer_than_a_name_may_be(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work = project / "pq"
    code = main(["--root", str(project), "pq", "new", "a" * 300, "--dir", str(work)])
    assert code == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == PatchQueueTreeError.reference and len(error.message) < 200, error
    assert f"is not a slug: at most {SLUG_LENGTH} lowercase letters" in error.message, error
    assert not work.exists()


@pytest.mark.parametrize(
    "argv",
    [["pq", "carry", FIX, "--report", "/dev/null/x"], ["pq", "import", "--dir", "/dev/null/x"]],
    ids=["carry --report", "import --dir"],
)
def test_an_output_that_cannot_be_a_directory_is_bad_input_at_once(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    before = snapshot(project)
    assert main(["--root", str(project), *argv]) == EXIT_BAD_INPUT
    said = capsys.readouterr().err
    error = failed(said)
    assert error.reference == OutputNotWritableError.reference and error.message.endswith(
        "/dev/null is not a directory"
    )
    assert "swap" not in said
    assert snapshot(project) == before


def test_quiet_pq_skip_keeps_its_result_on_stdout_and_says_nothing_else(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What pq writes goes through release/core/log.py: -q silences notes, never the command's result."""
    layout = Layout(project)
    series = layout.patches / "lines" / LINE / "series"
    series.write_text("".join(line for line in series.read_text().splitlines(True) if not line[0].isdigit()))
    number = fix_patch(project).name[:4]  # a patch named by its number, as a maintainer types it
    code = main(["--root", str(project), "-q", "pq", "skip", number, "--line", LINE, "--reason", "not needed"])
    said = capsys.readouterr()
    assert code == 0, said.err
    assert said.err == ""
    assert said.out == f"wrote patches/lines/{LINE}/series: skip {number} (not needed)\n"
