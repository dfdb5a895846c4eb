"""`scan` as a process: bad input is exit 2 with one `error:` line, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_release, snapshot


@pytest.mark.parametrize(
    "args, setup, message",
    [
        (["--since", "banana"], None, "'banana' is not a vLLM release"),
        (["--until", "v0.22.0rc1"], None, "is a pre-release"),
        ([], "[[line]]\nname = 'x'\n", "line 'x' needs a non-empty list of module paths"),
        ([], "[[line]]\nname = 'x'\nmodules = ['../etc/']\n", "is not a path inside the wheel"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(project: Path, args: list[str], setup: str | None, message: str) -> None:
    if setup is not None:
        (project / "patches" / "lines.toml").write_text(setup)
    before = snapshot(project)
    result = run_release(project, "scan", *args)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert snapshot(project) == before and not (project / "docs").exists()
