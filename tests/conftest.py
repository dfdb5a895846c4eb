"""Hooks and fixtures of every suite; shared functions live in tests/helpers/ (`import helpers`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import copy_project


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # "No tests ran" must fail CI as loudly as a failing test.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of vendor/ and patches/ that a test may rebase, break and inspect."""
    return copy_project(tmp_path)
