"""`upstream-pr` under an interpreter without pytest: one error naming it and how to get one, not the
hint for a test that proves nothing ("fix the test under patches/upstream-tests/")."""

from __future__ import annotations

import venv
from pathlib import Path

import pytest

from release.core.errors import NoPytestError
from release.evidence.runner import run_test


def test_an_interpreter_without_pytest_is_named_with_the_session_that_has_one(tmp_path: Path) -> None:
    venv.EnvBuilder(with_pip=False).create(tmp_path / "bare")  # a real interpreter, no pytest
    python = str(tmp_path / "bare" / "bin" / "python")
    (tmp_path / "work").mkdir()
    with pytest.raises(NoPytestError) as raised:
        run_test(python, tmp_path / "tree", "tests/test_x.py", "def test_x():\n    pass\n", tmp_path / "work")
    assert python in str(raised.value) and "nox -s upstream_pr" in raised.value.hint
