"""What the doctor tests share: the script, its schema, the scan data, and readers of its output."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "release" / "overlay" / "runtime" / "vllm_fused_moe" / "doctor.py"
SCHEMA = REPO / "docs" / "doctor.schema.json"
# The scan helper writes the real file (python -m release scan) beside the doctor; until it is in the
# tree, the fixture has its exact shape and the facts of the real wheels (0.19.0-0.21.0 affected, fixed
# from 0.22.0).
REAL_SCAN = SCRIPT.with_name("affected-releases.json")
FIXTURE_SCAN = REPO / "tests" / "doctor" / "affected-releases.fixture.json"


def scan_file() -> Path:
    return REAL_SCAN if REAL_SCAN.is_file() else FIXTURE_SCAN


def scan_data() -> dict[str, Any]:
    return json.loads(scan_file().read_text(encoding="utf-8"))


def doctor_module() -> ModuleType:
    """doctor.py loaded by path under a private name, as `release doctor` loads it."""
    spec = importlib.util.spec_from_file_location("doctor_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def validate(report: dict[str, Any]) -> dict[str, Any]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(report)
    return report


def imported(importtime_stderr: str) -> set[str]:
    """The module names of a `python -X importtime` run (its stderr)."""
    names = set()
    for line in importtime_stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$", line)
        if match:
            names.add(match.group(1))
    return names


def heavy(names: set[str]) -> set[str]:
    """torch and vLLM modules among `names` (our own vllm_fused_moe is not vLLM)."""
    return {n for n in names if n.split(".")[0] in ("torch", "vllm")}
