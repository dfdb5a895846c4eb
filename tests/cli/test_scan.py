"""`scan` as a process: bad input is exit 2 with one error line, and nothing is written.

A bad --since or --until is refused the same way in one process (tests/unit/test_cli_main.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_release, snapshot
from helpers.failure import failed
from release.core.errors import ConfigError, ReleaseError


@pytest.mark.parametrize(
    "args, setup, kind, message",
    [
        ([], "[[line]]\nname = 'x'\n", ConfigError, "line 'x' needs a non-empty list of module paths"),
        ([], "[[line]]\nname = 'x'\nmodules = ['../etc/']\n", ConfigError, "is not a path inside the wheel"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    project: Path, args: list[str], setup: str | None, kind: type[ReleaseError], message: str
) -> None:
    if setup is not None:
        (project / "patches" / "lines.toml").write_text(setup)
    before = snapshot(project)
    result = run_release(project, "scan", *args)
    assert result.returncode == 2, result.stderr
    error = failed(result)
    assert error.reference == kind.reference and message in error.message, result.stderr
    assert snapshot(project) == before and not (project / "docs").exists()
