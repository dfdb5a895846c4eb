"""`-q` and `-v` as `release.cli.main` takes them, in this process: what needs no git and no source.

What they do to a real run's notes and report (a dry-run rebase, git commands): tests/cli/test_verbosity.py.
That `--help` documents both is the program's help snapshot (tests/unit/snapshots/release.txt).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.failure import failed
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, MalformedSeriesError


def test_quiet_keeps_the_error_and_hint_lines_of_a_failure(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "patches" / "series").write_text("0099-missing.patch\n")
    assert main(["--root", str(project), "-q", "check"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    error = failed(err)
    assert error.reference == MalformedSeriesError.reference and error.hint, err
    assert len(err.splitlines()) == 2, err


def test_quiet_and_verbose_together_are_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--root", str(project), "-q", "-v", "check"])
    assert exited.value.code == EXIT_BAD_INPUT
    assert "not allowed with argument" in capsys.readouterr().err
