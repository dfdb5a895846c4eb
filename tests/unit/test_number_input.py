"""Numbers typed on the command line are bad input when no command could use them: exit 2, one line.

A version of 5,000 digits (Python refuses int() of more than 4,300 digits with a ValueError) is
refused by the one version grammar (release/core/versions.py) for every command that takes one;
a doctor --timeout of inf or 1e300 (which overflow the waits of subprocess) is refused before any
interpreter is started.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers.failure import failed
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, BadTagError, DoctorError, ReleaseError, UnknownTagError

HUGE = "0." + "9" * 5000 + ".0"


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["scan", "--since", HUGE, "--dry-run"], BadTagError),
        (["scan", "--until", "v" + HUGE, "--dry-run"], BadTagError),
        (["rebase", HUGE, "--dry-run"], UnknownTagError),
        (["train", "add", HUGE], UnknownTagError),
    ],
    ids=["scan --since", "scan --until", "rebase", "train add"],
)
def test_a_version_of_thousands_of_digits_is_bad_input(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], kind: type[ReleaseError]
) -> None:
    assert main(["--root", str(project), *argv]) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == kind.reference and "characters) is not a vLLM release" in error.message, error
    assert len(error.message) < 200  # the input is cut short, not echoed


@pytest.mark.parametrize("timeout", ["inf", "1e300", "nan", "0", "-1"])
def test_doctor_refuses_a_timeout_no_wait_can_take(capsys: pytest.CaptureFixture[str], timeout: str) -> None:
    # A real interpreter, never started: the timeout is refused first (this tier starts no process).
    assert main(["doctor", "--python", sys.executable, "--timeout", timeout]) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == DoctorError.reference
    assert error.message == f"--timeout {float(timeout):g} is not a number of seconds in (0, 86400]"
