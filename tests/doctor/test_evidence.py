"""The doctor shows what `publish` proved of the installed wheel (issue 35): INDEX_DIR/evidence/<wheel>.json of the
index --index-url names, read over file:// here (http(s):// is the same urllib read), bounded, with a timeout.

The evidence file is the one the evidence stage writes (release.evidence.gather.Evidence.text), of a record in the
shape gather() builds; its runs under torch are tests/e2e/test_evidence.py's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from helpers.doctor import doctor_module, judge, overlay, scan_data, validate
from helpers.train import load_train
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.evidence.gather import FIXED, Evidence
from release.queue.regression import bug_patches, upstream_test
from release.scan.run import bug_statuses, release_status


def _an_older_lines_proof() -> tuple[str, str, str, str]:
    """(vLLM version, its line, a bug, that bug's test on the line) from the checkout: the train's oldest tag
    and the first bug patch of the queue (retired ones too), never today's data written here."""
    layout = Layout.default()
    entry = load_train(layout).entries[0]
    patch = bug_patches(layout)[0]
    found = upstream_test(layout, patch, entry.line)
    assert found is not None and patch.purpose.bug
    return version_of_tag(entry.tag), entry.line, patch.purpose.bug, found[0]


VERSION, LINE, BUG, TEST = _an_older_lines_proof()
WHEEL = f"vllm_fused_moe-{VERSION}+fm.1-py3-none-any.whl"


def published(index: Path, wheel: str = WHEEL, named: str = WHEEL) -> Path:
    record: dict[str, Any] = {
        "schema": 1,
        "wheel": {"name": named, "sha256": "ab" * 32},
        "vllm": {"tag": f"v{VERSION}", "version": VERSION, "wheel": "vllm.whl", "sha256": "cd" * 32},
        "line": LINE,
        "tool": {"digest": "sha256:00", "commit": "0" * 40},
        "python": "/usr/bin/python3",
        "bugs": [{"bug": BUG, "test": TEST, "verdict": FIXED, "pristine": {}, "wheel": {}, "recorded": True}],
    }
    path = index / "evidence" / f"{wheel}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(Evidence(named, record).text())
    return path


def test_the_installed_wheels_evidence_is_read_from_the_index_and_reported(tmp_path: Path) -> None:
    doctor = doctor_module()
    index = tmp_path / "index"
    published(index)
    # Its simple/ page: the same index. Not bound to an install here (test_hostile_index.py binds it).
    read = doctor.evidence.read_evidence(f"file://{index}/simple/", WHEEL, bind=False)
    assert read.found and read.problem is None, read
    assert (read.vllm_tag, read.line, read.wheel_sha256) == (f"v{VERSION}", LINE, "ab" * 32)
    assert [(b.bug, b.verdict, b.test) for b in read.bugs] == [(BUG, FIXED, TEST)]
    report = judge(doctor, VERSION, doctor.release_facts(None, "no scan", VERSION), overlay(doctor))
    facts = doctor.report_from_json(report).facts
    report = doctor.Report(dataclasses.replace(facts, evidence=read), doctor.Verdict.CANNOT_TELL, "s", None)
    said = validate(report.to_json())["evidence"]
    assert said["found"] and said["bugs"] == [{"bug": BUG, "verdict": FIXED, "test": TEST}]
    assert doctor.report_from_json(report.to_json()).facts.evidence == read
    assert f"evidence          {WHEEL} on vLLM v{VERSION} (line {LINE}): {BUG}: fixed" in doctor.format_report(report)


@pytest.mark.parametrize("case", ["missing", "another wheel's", "not JSON", "too large", "no scheme"])
def test_evidence_the_doctor_cannot_read_is_a_finding_not_a_crash(tmp_path: Path, case: str) -> None:
    doctor = doctor_module()
    index = tmp_path / "index"
    url = f"file://{index}"
    if case == "another wheel's":
        published(index, named=f"vllm_fused_moe-{VERSION}+fm.2-py3-none-any.whl")
    elif case in ("not JSON", "too large"):
        path = published(index)
        path.write_bytes(b"{" if case == "not JSON" else b" " * (doctor.evidence.EVIDENCE_LIMIT + 1))
    elif case == "no scheme":
        published(index)
        url = str(index)
    read = doctor.evidence.read_evidence(url, WHEEL, timeout=5)
    assert not read.found and read.problem and not read.bugs, read
    said = {
        "missing": "not read",
        "another wheel's": "not of",
        "not JSON": "not JSON",
        "too large": "larger than",
        "no scheme": "not a file://",
    }[case]
    assert said in read.problem, read.problem


def test_a_release_whose_line_skips_the_bugs_patch_is_affected_for_the_doctor() -> None:
    """Issue 35, path 3: a line's `skip` counted for nothing, so a scan called its releases `not affected` and
    the doctor on one said `not-affected (exit 0)`. The scan's own status functions, fed the patch states a scan
    of a line that skips 0001 records (`skipped`), make the entry the doctor reads: it says affected."""
    data = scan_data()
    bug_of = {name: info["bug"] for name, info in data["patches"].items() if info.get("bug")}
    version = next(v for v, e in data["releases"].items() if e["status"] == "affected" and e.get("in_train"))
    entry = data["releases"][version]
    patches = dict.fromkeys(entry["patches"], "skipped")
    bugs = {bug: status.value for bug, status in bug_statuses(patches, bug_of).items()}
    data["releases"][version] = {**entry, "patches": patches, "bugs": bugs, "status": release_status(bugs).value}
    doctor = doctor_module()
    said = doctor.release_facts(doctor.ScanData.from_json(data), None, version)
    assert said.status is doctor.Status.AFFECTED and set(said.needs) == set(bug_of.values()), said
