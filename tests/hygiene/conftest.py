"""The hygiene tier keeps the unit tier's promise, with the unit tier's guard: one process, no network.

These tests read the checkout's own files (docs, workflows, pins, dependency groups, the import
contracts) rather than the tooling's logic; tests/unit/conftest.py is the guard and says what it
refuses. Its hooks are this directory's too: a conftest's `pytest_*` functions are its hooks,
wherever they were defined.
"""

from __future__ import annotations

from tests.unit.conftest import (
    pytest_make_collect_report,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)

__all__ = ["pytest_make_collect_report", "pytest_runtest_call", "pytest_runtest_setup", "pytest_runtest_teardown"]
