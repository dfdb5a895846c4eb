"""The doctor's words on a release come from the bug table (the scan data's `bugs`), for a fork with two bugs.

The checked-in scan data with a second bug added as `scan` writes one (tests/e2e/test_second_bug.py has the
real tool write it): its fix, 0002, is needed from the oldest affected release through the newest scanned one,
past the first release that has 0001's fix upstream. No release is named here: each comes from the data.
"""

from __future__ import annotations

import json
from typing import Any

from helpers import REPO
from release.core.layout import Layout
from vllm_fused_moe._doctor.installed import release_facts
from vllm_fused_moe._doctor.records import ScanData
from vllm_fused_moe._doctor.words import Status

SECOND = "https://example.invalid/bugs/2"
SECOND_TITLE = "the shape check that upstream never took"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def two_bugs() -> tuple[dict[str, Any], str, str]:
    """The scan data with SECOND affecting every release from the oldest affected one on; and 0001's bug."""
    document = json.loads(Layout(REPO).affected_json.read_text())
    [(first, _)] = document["bugs"].items()
    affected = [v for v, e in document["releases"].items() if e["status"] == "affected"]
    oldest = min(affected, key=_key)
    document["bugs"][SECOND] = {"title": SECOND_TITLE, "patches": ["0002-x.patch"], "first_fixed": None}
    for version, entry in document["releases"].items():
        if entry["status"] != "not-affected" and _key(version) >= _key(oldest):
            entry["bugs"][SECOND] = "affected"
            entry["status"] = "affected"
    return document, first, oldest


def test_the_release_line_names_each_bug_the_release_has_by_the_bug_tables_title_and_first_fix() -> None:
    document, first, oldest = two_bugs()
    scan = ScanData.from_json(document)
    title, fixed = document["bugs"][first]["title"], document["bugs"][first]["first_fixed"]
    both = next(v for v in document["releases"] if _key(oldest) <= _key(v) < _key(fixed))
    said = release_facts(scan, None, both)
    assert said.status is Status.AFFECTED and set(said.needs) == {first, SECOND}
    assert f"{title} (fixed upstream in {fixed})" in said.why
    assert f"{SECOND_TITLE} (no upstream release fixes it yet)" in said.why
    assert "double reduce" not in said.why  # no patch's own words

    # The first release with 0001's fix upstream has the second bug only: the doctor says that, not 0001's.
    said = release_facts(scan, None, fixed)
    assert said.status is Status.AFFECTED and said.needs == (SECOND,)
    assert said.why.startswith(f"this release has {SECOND_TITLE} (no upstream release fixes it yet)")
    assert f"upstream's fix for {title} (fixed upstream in {fixed})" in said.why

    # A release with neither bug.
    neither = next(v for v, e in document["releases"].items() if e["status"] == "not-affected")
    said = release_facts(scan, None, neither)
    assert said.status is Status.NOT_AFFECTED and said.needs == ()
    assert title not in said.why and SECOND_TITLE not in said.why


def test_with_one_bug_a_fixed_release_is_named_by_that_bugs_title() -> None:
    document = json.loads(Layout(REPO).affected_json.read_text())
    [(_, info)] = document["bugs"].items()
    said = release_facts(ScanData.from_json(document), None, info["first_fixed"])
    assert said.status is Status.FIXED
    assert said.why == f"this release has upstream's fix for {info['title']} (fixed upstream in {info['first_fixed']})"
