"""What release/core/git.py says when git cannot start (a child process is forked: the cli tier)."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.core.errors import GitError
from release.core.git import git


def test_a_working_directory_that_is_gone_is_named_not_taken_for_a_missing_git(tmp_path: Path) -> None:
    gone = tmp_path / "scratch"
    with pytest.raises(GitError, match=r"cannot run in .*scratch: the directory is gone"):
        git("status", cwd=gone)
