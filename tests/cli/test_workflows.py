"""The GitHub workflows, checked by the real linters, each a process.

check-jsonschema (with its vendored GitHub workflow schema) and zizmor both run offline.
They are installed by `nox -s test`; run elsewhere without them, these tests skip with
the reason, except on CI (CI=true), where a missing linter is a failure. What the workflows
must say is read in-process in tests/hygiene/test_workflows.py, which also holds, with no ignore,
the four properties of zizmor's audits it overlaps (its docstring names them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def linter(name: str) -> str:
    beside_python = Path(sys.executable).parent / name
    found = str(beside_python) if beside_python.exists() else shutil.which(name)
    if found:
        return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{name} is not installed, and on CI the workflow linters must run (nox -s test installs it)")
    pytest.skip(f"{name} is not installed here; `nox -s test` installs it (CI fails instead of skipping)")


def test_check_jsonschema_github_workflows_schema() -> None:
    exe = linter("check-jsonschema")
    proc = subprocess.run(
        [exe, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok -- validation done" in proc.stdout


def test_check_jsonschema_catches_a_broken_workflow(tmp_path: Path) -> None:
    # The schema check is real: a job without runs-on is rejected.
    exe = linter("check-jsonschema")
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    steps:\n      - run: true\n")
    proc = subprocess.run(
        [exe, "--builtin-schema", "vendor.github-workflows", str(broken)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout


def zizmor_findings(paths: list[Path]) -> list[dict[str, Any]]:
    exe = linter("zizmor")
    # The auditor persona reports everything, including what the default persona hides;
    # findings we accept are explained next to an inline `zizmor: ignore[...]` comment.
    proc = subprocess.run(
        [exe, "--offline", "--persona=auditor", "--format=json", "--no-progress", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 10, 11, 12, 13, 14), proc.stderr  # 1x: findings of some severity
    findings: list[dict[str, Any]] = json.loads(proc.stdout or "[]")
    return findings


def test_zizmor_finds_nothing_left_unexplained() -> None:
    findings = zizmor_findings(WORKFLOWS)
    summary = [(f["ident"], f["determinations"]["severity"], f["locations"][0]["symbolic"]["key"]) for f in findings]
    assert findings == [], summary


def test_zizmor_catches_an_unsafe_workflow(tmp_path: Path) -> None:
    # The audit is real: template injection and an unpinned action are found.
    unsafe = tmp_path / "unsafe.yml"
    unsafe.write_text(
        "on: pull_request_target\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
        '      - uses: some/action@main\n      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    idents = {f["ident"] for f in zizmor_findings([unsafe])}
    assert {"template-injection", "unpinned-uses"} <= idents
