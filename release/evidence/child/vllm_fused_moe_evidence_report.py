"""The tool's own pytest plugin, named with `-p` (autoloading is off): what the run reports to the tool.

Loaded in the regression test's run (release/evidence/runner.py; standard library and pytest only): each
test's report, each collection failure and the session's end with pytest's exit status are written as
JSON lines to a pipe the tool opened and the run inherited (its fd in VLLM_FUSED_MOE_EVIDENCE_FD, taken
out of the environment here before any test runs). The verdict is read from these lines and checked
against the run's exit status, never from a file in the run's directory, which the test can rewrite.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_FD = int(os.environ.pop("VLLM_FUSED_MOE_EVIDENCE_FD", "-1"))


def _send(**fields: Any) -> None:
    if _FD >= 0:
        os.write(_FD, (json.dumps(fields) + "\n").encode())


def _message(report: pytest.CollectReport | pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(getattr(crash, "message", "") or report.longreprtext or "")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0][:500] if lines else ""


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _send(kind="collect", id=report.nodeid, outcome="failed", message=_message(report))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _send(
        kind="test",
        id=report.nodeid,
        when=report.when,
        outcome=report.outcome,
        xfail=hasattr(report, "wasxfail"),
        message=_message(report) if report.failed else "",
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _send(kind="session", exitstatus=int(exitstatus), collected=session.testscollected)
