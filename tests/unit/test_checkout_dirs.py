"""A checkout whose patches/ is missing or a file: each command that reads the queue says so in one
error line naming patches/ and its hint, exits 2 and changes nothing, in this process (before git or a source).
The same through a real process, for one shape: tests/cli/test_check_hardening.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import snapshot
from helpers.failure import failed
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT
from release.model.pin import Pin


@pytest.mark.parametrize(("shape", "says"), [("file", "is not a directory"), ("missing", "is missing")])
def test_patches_not_a_directory_is_one_line_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], shape: str, says: str
) -> None:
    head = Pin.load(project / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml").tag
    shutil.rmtree(project / "patches")
    if shape == "file":
        (project / "patches").write_text("not a directory\n")
    before = snapshot(project)  # vendor/'s files (patches/ has none now)
    for command in (["check"], ["status"], ["rebase", head, "--from", "pypi"]):
        assert main(["--root", str(project), *command]) == EXIT_BAD_INPUT, command
        said = capsys.readouterr()
        error = failed(said.err)
        assert error.message == f"{project / 'patches'} {says}" and error.hint, said.err
        assert len(said.err.splitlines()) == 2 and said.out == "", said  # the two lines, no traceback
    assert snapshot(project) == before
    assert (project / "patches").is_file() is (shape == "file")
