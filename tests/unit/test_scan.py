"""`scan`: every release on the index classified per patch, and the document doctor reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from helpers import REPO
from helpers.scan import FIX, schema_errors, train_versions
from release.core.layout import Layout
from release.model.outcome import PatchStatus
from release.model.patch import Patch
from release.pristine.lazy_wheel import Transfer
from release.scan.document import build_document, dumps, load_document, to_markdown
from release.scan.run import ReleaseResult, ScanOptions, ScanResult, bug_map, bug_statuses


def test_the_shipped_document_is_valid_and_agrees_with_the_train_and_the_docs() -> None:
    layout = Layout.default()
    assert schema_errors(layout.affected_json) == []
    document = load_document(layout.affected_json)
    assert document is not None
    assert layout.affected_md.read_text() == to_markdown(document), "docs/affected-releases.md is stale: run scan"
    train = train_versions(layout.root)
    for version, entry in document["releases"].items():
        assert entry["in_train"] == (version in train), f"{version}: run `nox -s scan` after changing the train"
        if entry["in_train"]:
            assert entry["status"] == "affected", f"{version} is in the train but {entry['status']}"


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d["releases"]["0.20.0"].update(status="broken"),
        lambda d: d["releases"]["0.20.0"].pop("in_train"),
        lambda d: d["releases"]["0.20.0"]["patches"].update({FIX: "maybe"}),
        lambda d: d.update(schema=2),
        lambda d: d.pop("fixed_in"),
    ],
)
def test_the_schema_rejects_a_document_doctor_could_not_read(tmp_path: Path, spoil: Any) -> None:
    document = json.loads(Layout.default().affected_json.read_text())
    spoil(document)
    broken = tmp_path / "affected-releases.json"
    broken.write_text(json.dumps(document))
    assert schema_errors(broken) != []


# ----------------------------------------------------------- the document alone


BUG = "https://example.com/bugs/1"
DOWNSTREAM = "0002-shape-check.patch"


def _patch(name: str = FIX, purpose: str = f"Bug: {BUG} the output is reduced twice") -> Patch:
    """A patch as the scan's document sees it: a name, a subject, and what it is for (its trailer)."""
    return Patch(name, f"From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] a fix\n\nWhy: a test.\n\n{purpose}\n")


def _result(version: str, state: str, patch: str = FIX, more: dict[str, str] | None = None) -> ReleaseResult:
    patches = {name: PatchStatus(said) for name, said in {patch: state, **(more or {})}.items()}
    result = ReleaseResult(version, "prepare_finalize", patches, f"vllm-{version}-x.whl", "0" * 64, "", "", Transfer())
    result.bugs = bug_statuses(patches, bug_map([_patch(), _patch(DOWNSTREAM, "Downstream: a check we keep")]))
    return result


def test_fixed_in_is_the_first_fixed_release_after_the_last_affected_one() -> None:
    results = [_result("0.1.0", "absent"), _result("0.2.0", "upstream"), _result("0.3.0", "applies")]
    results += [_result("0.4.0", "upstream"), _result("0.4.0.post1", "upstream")]
    document, _ = build_document(ScanResult(results, {}, [_patch()], 0.0), ScanOptions(Layout(REPO)), None, set())
    assert document["fixed_in"] == "0.4.0"
    assert document["patches"][FIX]["first_upstream"] == "0.2.0"
    assert [document["releases"][v]["status"] for v in document["scanned"]] == [
        "not-affected",
        "fixed",
        "affected",
        "fixed",
        "fixed",
    ]
    assert document["releases"]["0.3.0"]["in_train"] is False


def test_a_ranged_scan_keeps_releases_classified_for_the_same_patches_only() -> None:
    options = ScanOptions(Layout(REPO), since=Version("0.3.0"))
    earlier = [_result("0.1.0", "absent"), _result("0.2.0", "applies"), _result("0.3.0", "applies")]
    previous, _ = build_document(ScanResult(earlier, {}, [_patch()], 0.0), ScanOptions(Layout(REPO)), None, set())
    previous["releases"]["0.1.0"]["patches"] = {"0002-other.patch": "absent"}  # classified for another series
    now = ScanResult([_result("0.3.0", "upstream")], {}, [_patch()], 0.0)
    document, dropped = build_document(now, options, json.loads(dumps(previous)), {Version("0.2.0")})
    assert dropped == ["0.1.0"]
    assert document["scanned"] == ["0.2.0", "0.3.0"]
    assert document["releases"]["0.2.0"]["in_train"] is True  # recomputed from the train, not kept
    assert document["releases"]["0.3.0"]["status"] == "fixed" and document["fixed_in"] == "0.3.0"


def test_status_is_per_bug_and_a_downstream_patch_never_makes_a_release_affected(tmp_path: Path) -> None:
    """Two patches: 0001 fixes a bug, 0002 is downstream. Where 0001 is upstream and 0002 still applies, the
    release is fixed (not affected by 0002), and a train tag there carries downstream changes only."""
    two = [_patch(), _patch(DOWNSTREAM, "Downstream: a check we keep")]
    results = [
        _result("0.1.0", "applies", more={DOWNSTREAM: "applies"}),
        _result("0.2.0", "upstream", more={DOWNSTREAM: "applies"}),
        _result("0.3.0", "upstream", more={DOWNSTREAM: "skipped"}),
    ]
    train = {Version("0.1.0"), Version("0.2.0")}
    document, _ = build_document(ScanResult(results, {}, two, 0.0), ScanOptions(Layout(REPO)), None, train)
    releases = document["releases"]
    assert [releases[v]["status"] for v in document["scanned"]] == ["affected", "fixed", "fixed"]
    assert [releases[v]["bugs"] for v in document["scanned"]] == [{BUG: "affected"}, {BUG: "fixed"}, {BUG: "fixed"}]
    assert document["fixed_in"] == "0.2.0" and document["bugs"][BUG]["fixed_in"] == "0.2.0"
    assert document["bugs"][BUG] == {
        "title": "the output is reduced twice",
        "patches": [FIX],
        "first_fixed": "0.2.0",
        "fixed_in": "0.2.0",
    }
    assert document["patches"][DOWNSTREAM]["purpose"] == "downstream" and document["patches"][DOWNSTREAM]["bug"] is None
    assert document["patches"][DOWNSTREAM]["first_upstream"] is None
    markdown = to_markdown(document)
    assert "Fixed upstream from: 0.2.0." in markdown
    assert "In the train for downstream changes only: 0.2.0." in markdown
    assert "| 0.2.0 | fixed upstream | prepare_finalize | upstream | applies | downstream only |" in markdown
    written = tmp_path / "affected-releases.json"
    written.write_text(dumps(document))
    assert schema_errors(written) == []


def test_the_summary_is_a_few_lines_counting_each_scanned_release_once() -> None:
    """`scan` prints this by default; the whole table is --markdown's (docs/affected-releases.md)."""
    from release.scan.update import summary

    document = load_document(Layout(REPO).affected_json)
    assert document is not None
    scanned = list(document["releases"])
    lines = summary(document, scanned).splitlines()
    assert len(lines) <= 8 and all(len(line) <= 100 for line in lines), lines
    counts = [int(line.split()[1]) for line in lines if line.startswith("  ")]
    assert sum(counts) == len(scanned)
    outside = [v for v, e in document["releases"].items() if e["status"] == "affected" and not e["in_train"]]
    assert not outside or f"affected and not in the train: {', '.join(outside)}" in lines
    assert "--markdown" in lines[-1] and "--json" in lines[-1]


def test_a_line_that_skips_a_bugs_patch_leaves_the_release_affected_never_not_affected() -> None:
    """A line's `skip` is a claim only the bug's test proves (publish's evidence), not a finding: the scan calls
    a release whose line skips the bug's only patch affected (issue 35: it said `not affected`)."""
    bug_of = bug_map([_patch()])
    assert bug_statuses({FIX: "skipped"}, bug_of) == {BUG: "affected"}
    assert bug_statuses({FIX: "absent"}, bug_of) == {BUG: "not-affected"}


def test_a_ranged_scan_keeps_a_proven_skip_of_a_release_it_does_not_read_again(tmp_path: Path) -> None:
    """A skip proven on a release (`evidence`; the scan reads the proof: tests/cli/test_scan.py) leaves it not
    affected by that bug, and a later scan of another range keeps that from the document, in both outputs."""
    proven = _result("0.1.0", "skipped")
    proven.proven = [FIX]
    proven.bugs = bug_statuses(proven.patches, bug_map([_patch()]), proven.proven)
    earlier = ScanResult([proven, _result("0.2.0", "skipped")], {}, [_patch()], 0.0)
    previous, _ = build_document(earlier, ScanOptions(Layout(REPO)), None, set())
    now = ScanResult([_result("0.3.0", "applies")], {}, [_patch()], 0.0)
    options = ScanOptions(Layout(REPO), since=Version("0.3.0"))
    document, _ = build_document(now, options, json.loads(dumps(previous)), set())
    releases = document["releases"]
    assert [releases[v]["bugs"][BUG] for v in document["scanned"]] == ["not-affected", "affected", "affected"]
    assert releases["0.1.0"]["proven_skips"] == [FIX] and "proven_skips" not in releases["0.2.0"]
    assert "| 0.1.0 | not affected | prepare_finalize | skipped, proven |" in to_markdown(document)
    written = tmp_path / "affected-releases.json"
    written.write_text(dumps(document))
    assert schema_errors(written) == []
