"""The doctor compares what the installed overlay carries with the bugs its vLLM release has, per bug.

In process, on the shipped scan data (release/overlay/runtime/vllm_fused_moe/affected-releases.json):
an overlay for the installed release that activates but carries no patch for a bug the release is
affected by is `affected` (exit 1), never `fixed-live`, and the fix is its newest patch level; a
release fixed upstream whose train tag carries only a downstream patch is `not-affected` (exit 0)
and the report says an optional overlay is published for it. No release is named here: each comes
from the data.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from typing import Any

import pytest

from helpers.doctor import doctor_module, judge, overlay, scan_data, validate
from helpers.failure import failed
from release.scan.run import bug_statuses, release_status

doctor = doctor_module()
DATA = scan_data()
DOWNSTREAM = "0002-shape-check.patch"


def _bug() -> tuple[str, dict[str, Any]]:
    [(bug, info)] = DATA["bugs"].items()  # one bug today; the test holds for each
    return bug, info


def _affected_train_tag() -> str:
    """A release that is affected and in the train (as 0.19.1 is in the issue's story)."""
    return str(next(v for v, e in DATA["releases"].items() if e["status"] == "affected" and e["in_train"]))


def _report(data: dict[str, Any], vllm: str, **installed: Any) -> dict[str, Any]:
    """report() as the doctor makes it in an environment with vLLM `vllm` and our overlay as given."""
    release = doctor.release_facts(doctor.ScanData.from_json(data), None, vllm)
    state = doctor.compare_fixes(overlay(doctor, **installed), release)
    return validate(judge(doctor, vllm, release, state))


def _ours(version: str, patches: list[dict[str, Any]]) -> dict[str, Any]:
    """Our overlay for `version`, installed, activating, its hook in place, carrying `patches` (build info)."""
    return {
        "installed": True,
        "version": f"{version}+fm.2",
        "vllm_tag": f"v{version}",
        "for_this_vllm": True,
        "location": "/site-packages/vllm_fused_moe",
        "mode": None,
        "hook_installed": True,
        "activates": True,
        "flashinfer_specifier": "==0.6.8.post1",
        "patches": [p["name"] for p in patches],
        "carried": patches,
    }


def test_an_overlay_without_the_patch_its_release_needs_is_affected_never_fixed_live() -> None:
    bug, info = _bug()
    version = _affected_train_tag()
    empty = _report(DATA, version, **_ours(version, []))  # `patches: []`, as the 0.19.1+fm.2 had
    assert (empty["verdict"], empty["exit_code"]) == ("affected", 1)
    assert empty["release"]["needs"] == [bug] and empty["overlay"]["missing_fixes"] == [bug]
    assert f"the installed overlay {version}+fm.2 carries no fix for {bug} ({info['title']})" in empty["summary"]
    # The documented install of its release's requirements file: our newest patch level, replacing it.
    assert empty["fix"]["argv"][-2:] == ["-r", f"https://index.example/requirements/vllm-{version}.txt"]
    assert "overlay lacks" in doctor.format_report(doctor.report_from_json(empty))
    downstream_only = [{"name": DOWNSTREAM, "subject": "a check", "bug": "", "trailers": {"Downstream": "a check"}}]
    assert _report(DATA, version, **_ours(version, downstream_only))["verdict"] == "affected"

    common = info["patches"][0]
    for carrying in (
        [{"name": common, "subject": "the fix", "bug": bug, "trailers": {}}],  # recorded by this build
        [{"name": common, "subject": "the fix", "trailers": {"Bug": f"{bug} {info['title']}"}}],  # older builds
        [{"name": "0001-a-line-variant.patch", "subject": "the fix", "trailers": {"Varies": common}}],  # a variant
    ):
        fixed = _report(DATA, version, **_ours(version, carrying))
        assert (fixed["verdict"], fixed["exit_code"]) == ("fixed-live", 0), carrying
        assert fixed["overlay"]["missing_fixes"] == [] and fixed["overlay"]["bugs"] == [bug]


def test_a_release_fixed_upstream_with_a_downstream_only_overlay_is_not_affected_and_says_it_is_optional() -> None:
    bug, _ = _bug()
    fixed = DATA["fixed_in"]
    data = copy.deepcopy(DATA)
    # What the scan writes once a downstream 0002 applies there and the train carries it (tests/unit/test_scan.py).
    data["patches"][DOWNSTREAM] = {"subject": "a check", "purpose": "downstream", "bug": None, "title": "a check",
                                   "first_upstream": None}  # fmt: skip
    entry = data["releases"][fixed]
    entry["patches"][DOWNSTREAM] = "applies"
    entry["in_train"] = True
    bug_of = {name: p["bug"] for name, p in data["patches"].items() if p["bug"]}
    entry["bugs"] = bug_statuses(entry["patches"], bug_of)
    entry["status"] = release_status(entry["bugs"])
    assert entry["status"] == "fixed" and entry["bugs"] == {bug: "fixed"}

    report = _report(data, fixed)
    assert (report["verdict"], report["exit_code"]) == ("not-affected", 0)
    assert report["release"]["optional_overlay"] is True and report["release"]["needs"] == []
    assert "published with downstream changes only (optional" in report["summary"]
    assert report["fix"] is None
    assert _report(DATA, fixed)["release"]["optional_overlay"] is False  # the shipped data: nothing downstream yet


# ------------------------------------------------------------------------- installs pip keeps as they are


def test_a_record_without_its_package_is_affected_and_the_fix_reinstalls_over_it(monkeypatch: Any) -> None:
    """The package folder deleted, the .dist-info left: pip would answer the plain install with
    `Requirement already satisfied`, so the fix forces it (test_doctor_venvs.py runs it for real)."""
    version = _affected_train_tag()
    monkeypatch.setattr(doctor.installed, "find_spec", lambda name: None)
    recorded = f"{version}+fm.1"
    monkeypatch.setattr(doctor.installed, "dist_version", lambda name: recorded if name == doctor.PROJECT else None)
    state = doctor.overlay_state()
    assert state.installed is False and state.version == recorded and state.damaged is True
    assert state.reason and "recorded as installed" in state.reason and f"{doctor.PACKAGE}/ is gone" in state.reason
    report = _report(DATA, version, **{f.name: getattr(state, f.name) for f in dataclasses.fields(state)})
    assert (report["verdict"], report["exit_code"]) == ("affected", 1)
    assert state.reason in report["summary"]
    assert report["fix"]["argv"][3:7] == ["install", "--force-reinstall", "--no-deps", "--no-index"]
    assert report["fix"]["argv"][-2:] == ["-r", f"https://index.example/requirements/vllm-{version}.txt"]
    assert "damaged" not in report["overlay"]  # schema-valid: the flag is the doctor's own
    assert f"{doctor.PROJECT} not installed: {state.reason}" in doctor.format_report(doctor.report_from_json(report))


def test_an_overlay_left_from_another_release_on_a_fixed_vllm_is_named_with_its_removal() -> None:
    fixed = DATA["fixed_in"]
    old = _affected_train_tag()
    stale = {
        "installed": True,
        "version": f"{old}+fm.1",
        "vllm_tag": f"v{old}",
        "for_this_vllm": False,
        "location": "/site-packages/vllm_fused_moe",
        "activates": False,
        "reason": f"built for vLLM v{old}, but vLLM {fixed} is installed",
    }
    report = _report(DATA, fixed, **stale)
    assert (report["verdict"], report["exit_code"]) == ("not-affected", 0)
    assert f"{doctor.PROJECT} {old}+fm.1 is still installed, built for vLLM v{old}" in report["summary"]
    assert f"pip check fails on its requirement of vllm=={old}" in report["summary"]
    assert report["fix"]["argv"] == [sys.executable, "-m", "pip", "uninstall", "-y", doctor.PROJECT]
    assert _report(DATA, fixed)["fix"] is None  # nothing left over: nothing to do


def test_the_console_script_without_its_package_says_how_to_repair_it(
    monkeypatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import _vllm_fused_moe_cli

    monkeypatch.setitem(sys.modules, "vllm_fused_moe.__main__", None)  # what a deleted folder imports as
    monkeypatch.setenv(doctor.INDEX_ENV, "https://index.example/simple")
    assert _vllm_fused_moe_cli.main() == 2
    said = capsys.readouterr().err
    error = failed(said)  # the runtime's own line: no reference (it is no part of release/)
    assert said.startswith("error: ") and error.message.startswith("vllm-fused-moe ") and error.hint, said
    assert "Traceback" not in said
    assert "--force-reinstall --no-deps --no-index --find-links https://index.example/simple/vllm-fused-moe/" in said
    assert "-m pip uninstall -y vllm-fused-moe" in said


def test_the_console_script_without_its_package_or_an_index_says_what_the_placeholder_is(
    monkeypatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, 2: `<INDEX_URL>` pasted as is fails ("Could not open requirements file"): the hint says
    what goes there, and which variable makes it exact."""
    import _vllm_fused_moe_cli

    monkeypatch.setitem(sys.modules, "vllm_fused_moe.__main__", None)
    monkeypatch.delenv(doctor.INDEX_ENV, raising=False)
    assert _vllm_fused_moe_cli.main() == 2
    said = capsys.readouterr().err
    assert "<INDEX_URL>: where our index is served" in said and doctor.INDEX_ENV in said, said


def test_another_releases_overlay_without_its_record_is_removed_before_the_install() -> None:
    """Issue 38, 3: RECORD lost on an overlay built for another release: pip cannot uninstall it, and an
    install over it (--ignore-installed) would leave its .dist-info beside the new one. The fix removes
    its files (those the doctor found), and the doctor asked again prints the install."""
    version = _affected_train_tag()
    leftovers = ["/site-packages/vllm_fused_moe", "/site-packages/vllm_fused_moe-0.0.1+fm.1.dist-info"]
    other = {
        **_ours("0.0.1", []),
        "for_this_vllm": False,
        "activates": False,
        "reason": "built for vLLM v0.0.1",
        "damaged": True,
        "record_lost": True,
        "leftovers": leftovers,
    }
    report = _report(DATA, version, **other)
    assert (report["verdict"], report["exit_code"]) == ("affected", 1)
    assert report["fix"]["argv"] == ["rm", "-r", *leftovers] and "run the doctor again" in report["fix"]["why"]
    removed = _report(DATA, version)  # then: not installed, the documented install
    assert removed["fix"]["argv"][3] == "install" and "--ignore-installed" not in removed["fix"]["argv"]


def test_the_vllm_index_the_tooling_reads_is_never_taken_for_our_overlay_index(
    monkeypatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """VLLM_FUSED_MOE_INDEX_URL names vLLM's index (PyPI) to the tooling; the doctor's fix command names our
    overlay index, by another variable: set to PyPI, the first never becomes `--find-links pypi.org/...`."""
    import _vllm_fused_moe_cli
    from release.pristine.index import INDEX_ENV as VLLM_INDEX_ENV

    assert doctor.INDEX_ENV != VLLM_INDEX_ENV
    monkeypatch.setitem(sys.modules, "vllm_fused_moe.__main__", None)
    monkeypatch.delenv(doctor.INDEX_ENV, raising=False)
    monkeypatch.setenv(VLLM_INDEX_ENV, "https://pypi.org/simple/")
    assert _vllm_fused_moe_cli.main() == 2
    said = capsys.readouterr().err
    assert "pypi.org" not in said and "--find-links <INDEX_URL>/simple/vllm-fused-moe/" in said, said
