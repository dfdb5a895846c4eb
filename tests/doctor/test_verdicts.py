"""Verdicts that must not say more than the doctor saw (issue 45), in process on the shipped scan data.

- `--live` whose import of vLLM fails (no torch) cannot say `fixed-live`: the classes were never read.
- An overlay that is live but whose install is damaged (RECORD lost: pip can neither upgrade nor
  remove it) prints a fix, so its exit is not 0: the verdict `damaged`, exit 1.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from helpers.doctor import doctor_module, judge, overlay, scan_data, validate

doctor = doctor_module()
DATA = scan_data()
VERSION = next(v for v, e in DATA["releases"].items() if e["status"] == "affected" and e["in_train"])


def _live_ours(**fields: object) -> tuple[Any, Any]:  # the doctor's release facts and overlay state
    """Our overlay for VERSION, installed, activating, its hook in place, carrying each fix the release needs."""
    release = doctor.release_facts(doctor.ScanData.from_json(DATA), None, VERSION)
    carried = [{"name": f"fix-{bug}", "subject": "the fix", "bug": bug, "trailers": {}} for bug in release.needs]
    state = overlay(
        doctor, installed=True, version=f"{VERSION}+fm.1", vllm_tag=f"v{VERSION}", for_this_vllm=True,
        location="/site-packages/vllm_fused_moe", mode="on", hook_installed=True, activates=True,
        patches=[p["name"] for p in carried], carried=carried, **fields,
    )  # fmt: skip
    return release, doctor.compare_fixes(state, release)


def _report(live: object = None, **fields: object) -> dict[str, object]:
    release, state = _live_ours(**fields)
    facts = doctor.report_from_json(judge(doctor, VERSION, release, state)).facts
    facts = dataclasses.replace(facts, overlay=state, live=live)
    return validate(doctor.conclude(facts, "https://index.example").to_json())


def test_the_overlay_in_place_is_fixed_live() -> None:
    report = _report()
    assert (report["verdict"], report["exit_code"], report["fix"]) == ("fixed-live", 0, None), report["summary"]


def test_live_that_cannot_import_vllm_never_says_fixed_live() -> None:
    failed = doctor.records.Live(doctor.ALL2ALL_MODULE, error="ModuleNotFoundError: No module named 'torch'")
    report = _report(live=failed)
    assert (report["verdict"], report["exit_code"]) == ("cannot-tell", 2), report["summary"]
    assert "No module named 'torch'" in str(report["summary"])


def test_a_live_overlay_whose_record_is_lost_is_damaged_exit_1_with_the_fix() -> None:
    report = _report(damaged=True, record_lost=True, reason="the install record of vllm-fused-moe (RECORD) is gone")
    assert (report["verdict"], report["exit_code"]) == ("damaged", 1), report["summary"]
    fix = report["fix"]
    assert isinstance(fix, dict) and fix["argv"][3:6] == ["install", "--ignore-installed", "--no-deps"], fix
