"""`scan`: every release on the index classified per patch, and the document doctor reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.pristine.lazy_wheel import Transfer
from release.queue.patch import Patch
from release.scan.document import build_document, dumps, load_document, to_markdown
from release.scan.run import ReleaseResult, ScanOptions, ScanResult
from release.train.model import Train
from tests.conftest import REPO, run_release, snapshot

SCHEMA = REPO / "docs" / "affected-releases.schema.json"
PATCH_0001 = "0001-flashinfer-nvlink-output-is-reduced.patch"

# What research on the real wheels found (every file read and checked against its RECORD): the
# FlashInfer NVLink classes live in prepare_finalize/ from 0.19.0 and are fixed from 0.22.0;
# 0.17.x/0.18.x keep them elsewhere (a line of their own, later). 0.20.1 and 0.21.0 were rebuilt
# with build tag 1, which pip takes. Columns: status, line, 0001, wheel prefix, FlashInfer pin.
FACTS_0_17_TO_0_22_1 = {
    "0.17.0": ("not-affected", None, "absent", "vllm-0.17.0-cp", "flashinfer-python==0.6.4"),
    "0.17.1": ("not-affected", None, "absent", "vllm-0.17.1-cp", "flashinfer-python==0.6.4"),
    "0.18.0": ("not-affected", None, "absent", "vllm-0.18.0-cp", "flashinfer-python==0.6.6"),
    "0.18.1": ("not-affected", None, "absent", "vllm-0.18.1-cp", "flashinfer-python==0.6.6"),
    "0.19.0": ("affected", "prepare_finalize", "applies", "vllm-0.19.0-cp", "flashinfer-python==0.6.6"),
    "0.19.1": ("affected", "prepare_finalize", "applies", "vllm-0.19.1-cp", "flashinfer-python==0.6.6"),
    "0.20.0": ("affected", "prepare_finalize", "applies", "vllm-0.20.0-cp", "flashinfer-python==0.6.8.post1"),
    "0.20.1": ("affected", "prepare_finalize", "applies", "vllm-0.20.1-1-cp", "flashinfer-python==0.6.8.post1"),
    "0.20.2": ("affected", "prepare_finalize", "applies", "vllm-0.20.2-cp", "flashinfer-python==0.6.8.post1"),
    "0.21.0": ("affected", "prepare_finalize", "applies", "vllm-0.21.0-1-cp", "flashinfer-python==0.6.8.post1"),
    "0.22.0": ("fixed", "prepare_finalize", "upstream", "vllm-0.22.0-cp", "flashinfer-python==0.6.11.post2"),
    "0.22.1": ("fixed", "prepare_finalize", "upstream", "vllm-0.22.1-cp", "flashinfer-python==0.6.11.post2"),
}


def validate(document: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema (the test group's pin) against docs/affected-releases.schema.json."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA), str(document)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def train_versions(root: Path) -> set[str]:
    return {version_of_tag(tag) for tag in Train.load(Layout(root).train).tags}


@pytest.mark.network
def test_scan_from_0_17_0_to_0_22_1_classifies_each_release(project: Path) -> None:
    document_path = project / "vendor" / "vllm_fused_moe" / "affected-releases.json"
    document_path.unlink(missing_ok=True)  # start from nothing: this range alone
    result = run_release(project, "scan", "--from", "pypi", "--since", "v0.17.0", "--until", "0.22.1", "--json")
    assert result.returncode == 0, result.stderr
    assert "[ 1/12] 0.17.0" in result.stderr and "[12/12] 0.22.1" in result.stderr  # progress, on stderr
    assert "downloading" not in result.stderr  # range requests (or the cache), never whole wheels
    document = json.loads(document_path.read_text())
    assert json.loads(result.stdout) == document
    assert validate(document_path).returncode == 0, validate(document_path).stdout

    assert document["scanned"] == list(FACTS_0_17_TO_0_22_1)
    assert document["newest_scanned"] == "0.22.1" and document["fixed_in"] == "0.22.0"
    assert document["patches"][PATCH_0001]["first_upstream"] == "0.22.0"
    train = train_versions(project)
    for version, (status, line, state, wheel, flashinfer) in FACTS_0_17_TO_0_22_1.items():
        entry = document["releases"][version]
        assert (entry["status"], entry["line"], entry["patches"][PATCH_0001]) == (status, line, state), version
        assert entry["wheel"].startswith(wheel) and entry["flashinfer"] == flashinfer, entry
        assert entry["in_train"] == (version in train)
    markdown = (project / "docs" / "affected-releases.md").read_text()
    assert markdown == to_markdown(document)
    assert "| 0.21.0 | **affected** | prepare_finalize | applies |" in markdown

    # A narrower scan updates its range and keeps the rest of the document.
    again = run_release(project, "scan", "--since", "0.22.0")
    assert again.returncode == 0, again.stderr
    merged = json.loads(document_path.read_text())
    assert merged["scanned"][: len(FACTS_0_17_TO_0_22_1)] == list(FACTS_0_17_TO_0_22_1)
    assert Version(merged["newest_scanned"]) >= Version("0.22.1")
    assert merged["releases"]["0.19.0"] == document["releases"]["0.19.0"]
    assert validate(document_path).returncode == 0


def test_the_shipped_document_is_valid_and_agrees_with_the_train_and_the_docs() -> None:
    layout = Layout.default()
    assert validate(layout.affected_json).returncode == 0
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
    assert validate(broken).returncode != 0


@pytest.mark.parametrize(
    "args, setup, message",
    [
        (["--since", "banana"], None, "'banana' is not a vLLM release"),
        (["--until", "v0.22.0rc1"], None, "is a pre-release"),
        ([], "[[line]]\nname = 'x'\n", "line 'x' needs a non-empty list of module paths"),
        ([], "[[line]]\nname = 'x'\nmodules = ['../etc/']\n", "is not a path inside the wheel"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(project: Path, args: list[str], setup: str | None, message: str) -> None:
    if setup is not None:
        (project / "patches" / "lines.toml").write_text(setup)
    before = snapshot(project)
    result = run_release(project, "scan", *args)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert snapshot(project) == before and not (project / "docs").exists()


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
