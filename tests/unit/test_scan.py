"""`scan`: every release on the index classified per patch, and the document doctor reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from helpers import REPO
from helpers.scan import PATCH_0001, schema_errors, train_versions
from release.core.layout import Layout
from release.model.patch import Patch
from release.pristine.lazy_wheel import Transfer
from release.scan.document import build_document, dumps, load_document, to_markdown
from release.scan.run import ReleaseResult, ScanOptions, ScanResult


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
        lambda d: d["releases"]["0.20.0"]["patches"].update({PATCH_0001: "maybe"}),
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


def _result(version: str, state: str, patch: str = PATCH_0001) -> ReleaseResult:
    return ReleaseResult(
        version, "prepare_finalize", {patch: state}, f"vllm-{version}-x.whl", "0" * 64, "", "", Transfer()
    )


def _patch(name: str = PATCH_0001) -> Patch:
    return Patch(name, "From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] a fix\n\n")


def test_fixed_in_is_the_first_fixed_release_after_the_last_affected_one() -> None:
    results = [_result("0.1.0", "absent"), _result("0.2.0", "upstream"), _result("0.3.0", "applies")]
    results += [_result("0.4.0", "upstream"), _result("0.4.0.post1", "upstream")]
    document, _ = build_document(ScanResult(results, {}, [_patch()], 0.0), ScanOptions(Layout(REPO)), None, set())
    assert document["fixed_in"] == "0.4.0"
    assert document["patches"][PATCH_0001]["first_upstream"] == "0.2.0"
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
