"""What the doctor tests share: the script, its schema, the scan data, and readers of its output."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema

from helpers import REPO

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
    data: dict[str, Any] = json.loads(scan_file().read_text(encoding="utf-8"))
    return data


def scan_records(data: dict[str, Any] | None = None) -> Any:
    """The scan data (`data`, else the file) as the doctor reads it: its ScanData record."""
    return doctor_module().ScanData.from_json(scan_data() if data is None else data)


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


def overlay(doctor: ModuleType, **fields: Any) -> Any:
    """The doctor's Overlay record: not installed, but for `fields` (lists as tuples; `carried` from build info)."""
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    if "carried" in given:
        given["carried"] = tuple(doctor.records.CarriedPatch.from_json(p) for p in given["carried"])
    return dataclasses.replace(doctor.blank_overlay(), **given)


def judge(
    doctor: ModuleType,
    vllm: str | None,
    release: Any,
    installed: Any = None,
    serve: Any = None,
    index_url: str | None = "https://index.example/simple",
    python: str = sys.executable,
) -> dict[str, Any]:
    """The report (JSON) that conclude() makes of these facts: as report() finds them in an environment
    with vLLM `vllm` and our overlay as `installed` says (default: not installed)."""
    facts = doctor.Facts(
        doctor=str(SCRIPT),
        python=python,
        vllm=vllm,
        flashinfer=None,
        scan=doctor.ScanRead(None, doctor.words.ScanSource.GIVEN, None, None, None),
        release=release,
        overlay=installed if installed is not None else doctor.blank_overlay(),
        serve=serve,
    )
    report: dict[str, Any] = doctor.conclude(facts, index_url).to_json()
    return report
