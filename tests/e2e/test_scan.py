"""`scan` over real release wheels from the package index (range requests, or the cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_release
from helpers.scan import FIX, train_versions, validate
from release.core.layout import Layout
from release.scan.document import to_markdown

# What research on the real wheels found (every file read and checked against its RECORD): the
# FlashInfer NVLink classes live in prepare_finalize/ from 0.19.0 and are fixed from 0.22.0;
# 0.17.x keeps the a2a class in flashinfer_a2a_prepare_finalize.py, 0.18.x the NVLink classes in
# fused_moe/flashinfer_nvlink_*_prepare_finalize.py: each its own release line, judged by that
# line's variant of 0001 (patches/lines.toml). 0.20.1 and 0.21.0 were rebuilt
# with build tag 1, which pip takes. Columns: status, line, 0001, wheel prefix, FlashInfer pin.
FACTS_0_17_TO_0_22_1 = {
    "0.17.0": ("affected", "flashinfer_a2a", "applies", "vllm-0.17.0-cp", "flashinfer-python==0.6.4"),
    "0.17.1": ("affected", "flashinfer_a2a", "applies", "vllm-0.17.1-cp", "flashinfer-python==0.6.4"),
    "0.18.0": ("affected", "flashinfer_nvlink", "applies", "vllm-0.18.0-cp", "flashinfer-python==0.6.6"),
    "0.18.1": ("affected", "flashinfer_nvlink", "applies", "vllm-0.18.1-cp", "flashinfer-python==0.6.6"),
    "0.19.0": ("affected", "prepare_finalize", "applies", "vllm-0.19.0-cp", "flashinfer-python==0.6.6"),
    "0.19.1": ("affected", "prepare_finalize", "applies", "vllm-0.19.1-cp", "flashinfer-python==0.6.6"),
    "0.20.0": ("affected", "prepare_finalize", "applies", "vllm-0.20.0-cp", "flashinfer-python==0.6.8.post1"),
    "0.20.1": ("affected", "prepare_finalize", "applies", "vllm-0.20.1-1-cp", "flashinfer-python==0.6.8.post1"),
    "0.20.2": ("affected", "prepare_finalize", "applies", "vllm-0.20.2-cp", "flashinfer-python==0.6.8.post1"),
    "0.21.0": ("affected", "prepare_finalize", "applies", "vllm-0.21.0-1-cp", "flashinfer-python==0.6.8.post1"),
    "0.22.0": ("fixed", "prepare_finalize", "upstream", "vllm-0.22.0-cp", "flashinfer-python==0.6.11.post2"),
    "0.22.1": ("fixed", "prepare_finalize", "upstream", "vllm-0.22.1-cp", "flashinfer-python==0.6.11.post2"),
}


@pytest.mark.network
def test_scan_from_0_17_0_to_0_22_1_classifies_each_release(project: Path) -> None:
    document_path = Layout(project).affected_json
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
    assert document["patches"][FIX]["first_upstream"] == "0.22.0"
    train = train_versions(project)
    for version, (status, line, state, wheel, flashinfer) in FACTS_0_17_TO_0_22_1.items():
        entry = document["releases"][version]
        assert (entry["status"], entry["line"], entry["patches"][FIX]) == (status, line, state), version
        assert entry["wheel"].startswith(wheel) and entry["flashinfer"] == flashinfer, entry
        assert entry["in_train"] == (version in train)
    markdown = (project / "docs" / "affected-releases.md").read_text()
    assert markdown == to_markdown(document)
    assert "| 0.21.0 | **affected** | prepare_finalize | applies |" in markdown

    # A narrower scan updates its range and keeps the rest of the document.
    # Bounded: an open range would read every release published since, a cost that grows with each one.
    again = run_release(project, "scan", "--since", "0.22.0", "--until", "0.22.1")
    assert again.returncode == 0, again.stderr
    merged = json.loads(document_path.read_text())
    assert merged["scanned"] == list(FACTS_0_17_TO_0_22_1)
    assert merged["newest_scanned"] == "0.22.1"
    assert merged["releases"]["0.19.0"] == document["releases"]["0.19.0"]
    assert validate(document_path).returncode == 0
