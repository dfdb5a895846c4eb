"""The release train's data (patches/train.toml), read, written and checked in this process.

The `train` commands as processes on real release wheels: tests/e2e/test_train.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from helpers import REPO, copy_project
from helpers.bad_train import BAD_TRAIN, SAYS
from helpers.failure import failed
from helpers.train import load_train
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, TrainFileError
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.train import Train
from release.queue.load import Queue, tag_patches
from release.queue.verified import (
    VerifiedFlashInfer,
    VerifiedVersion,
    read_verified,
    relying_on_flashinfer,
    wheel_range,
)


def train_of(root: Path) -> Train:
    return load_train(Layout(root))


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


def test_verified_toml_is_the_requirement_of_the_patches_that_rely_on_flashinfer_only() -> None:
    # Every patch our train tags carry today relies on FlashInfer's combine (Depends-On names flashinfer-python):
    # each tag's wheel range is its pin ∩ VERIFIED.toml. The same patch with a Depends-On that names nothing of
    # FlashInfer (a second bug's fix) makes a wheel that asks nothing of FlashInfer, even for a pin never verified.
    layout = Layout(REPO)
    verified = read_verified(layout.verified_toml)
    unverified_pin = "flashinfer-python==9.9.9"
    lines = read_lines(layout.lines)
    for entry in train_of(REPO).entries:
        carried = tag_patches(layout, lines.get(entry.line), entry.tag)
        assert relying_on_flashinfer(carried), entry.tag
        assert wheel_range(verified, entry.flashinfer, carried) == verified.range_for(entry.flashinfer)
        assert wheel_range(verified, unverified_pin, carried) is None
    [patch] = Queue.load(layout).patches[:1]
    said = patch.trailers["Depends-On"]
    own = Patch(patch.name, patch.text.replace(f"Depends-On: {said}", "Depends-On: nothing outside vLLM"))
    assert own.depends_on == "nothing outside vLLM" and relying_on_flashinfer([own]) == []
    assert wheel_range(verified, unverified_pin, [own]) == ""
    assert wheel_range(verified, unverified_pin, [own, patch]) is None  # one relying patch is enough


@pytest.mark.parametrize("bad", BAD_TRAIN)
def test_the_reader_refuses_a_train_file_the_tool_would_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    project = copy_project(tmp_path)
    layout = Layout(project)
    original = layout.train.read_text()
    layout.train.write_text(BAD_TRAIN[bad](original))
    assert layout.train.read_text() != original
    with pytest.raises(TrainFileError) as refused:
        load_train(layout)
    assert str(layout.train) in str(refused.value) and SAYS[bad] in str(refused.value)
    assert "patches/train.toml" in (refused.value.hint or "")
    # The command line says the same in one error line and one hint line, and exits 2.
    assert main(["--root", str(project), "train", "list"]) == EXIT_BAD_INPUT
    said = capsys.readouterr().err
    error = failed(said)
    assert (error.reference, error.message, error.hint) == (
        TrainFileError.reference,
        str(refused.value),
        refused.value.hint,
    )
    assert len(said.splitlines()) == 2, said


def test_the_train_round_trips_through_its_writer(tmp_path: Path) -> None:
    train = train_of(REPO)
    again = tmp_path / "train.toml"
    again.write_text(train.dumps())
    assert Train.load(again, [line.name for line in read_lines(Layout(REPO).lines).lines]) == train
    other = next(tag for tag in train.tags if tag != head_of(REPO))
    entry = train.get(other)
    assert entry is not None and train.without(other).with_entry(entry) == train
