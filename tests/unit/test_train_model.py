"""The release train's data (patches/train.toml), read and checked in this process.

The `train` commands as processes on real release wheels: tests/e2e/test_train.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from helpers import REPO
from release.core.layout import Layout
from release.queue.load import Queue
from release.queue.verified import VerifiedFlashInfer, VerifiedVersion
from release.train.model import Train


def train_of(root: Path) -> Train:
    return Train.load(Layout(root).train)


def head_of(root: Path) -> str:
    return Queue.load(Layout(root)).pin.tag


def test_the_checked_in_train_covers_the_affected_releases_and_its_head() -> None:
    # The scan's document (data) says which releases are affected; every one is in the train, on its line.
    document = json.loads(Layout(REPO).affected_json.read_text())
    affected = {f"v{v}": e["line"] for v, e in document["releases"].items() if e["status"] == "affected"}
    train = train_of(REPO)
    assert train.tags == list(affected)
    assert {e.tag: e.line for e in train.entries} == affected
    assert len({e.line for e in train.entries}) >= 2
    assert head_of(REPO) in train.tags


def test_the_checked_in_train_is_in_the_form_the_tool_writes() -> None:
    layout = Layout(REPO)
    assert train_of(REPO).dumps() == layout.train.read_text()


@pytest.mark.parametrize(
    "verified, pin, expected",
    [
        (["0.6.8.post1"], "flashinfer-python==0.6.8.post1", "==0.6.8.post1"),
        (["0.6.8.post1"], "flashinfer-python==0.6.6", None),
        (["0.6.6", "0.6.8.post1"], "flashinfer-python==0.6.6", "==0.6.6"),
        (["0.6.6", "0.6.8.post1"], "", ">=0.6.6,<=0.6.8.post1"),
        (["0.6.6", "0.6.7", "0.6.8.post1"], "flashinfer-python>=0.6.7", ">=0.6.7,<=0.6.8.post1"),
    ],
)
def test_a_tag_range_is_its_pin_intersected_with_the_verified_versions(
    verified: list[str], pin: str, expected: str | None
) -> None:
    model = VerifiedFlashInfer(tuple(VerifiedVersion(v, "test") for v in verified))
    found = model.range_for(pin)
    assert (found is None) is (expected is None)
    if found is not None and expected is not None:
        assert SpecifierSet(found) == SpecifierSet(expected)
