"""Every train tag's real METADATA, read by the one reader (release/pristine/metadata.py), gives the
FlashInfer pin patches/train.toml records for it, and the same pin the scan of that release gives.

The release wheels come from the package index once, then from the cache (members read lazily).
The cases the old regex got wrong, on made-up METADATA: tests/unit/test_metadata.py.
"""

from __future__ import annotations

import pytest

from helpers import REPO
from helpers.train import load_train
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.model.train import TrainEntry
from release.pristine import safe
from release.pristine.wheel import pypi_content

pytestmark = pytest.mark.network

TRAIN = load_train(Layout(REPO))


@pytest.mark.parametrize("entry", TRAIN.entries, ids=TRAIN.tags)
def test_each_train_tags_pin_comes_out_of_its_metadata_unchanged(entry: TrainEntry) -> None:
    content = pypi_content(version_of_tag(entry.tag), lambda name: False)
    metadata = safe.prove_wheel_version(content.metadata_raw, entry.tag, content.wheel)
    assert entry.flashinfer, f"{entry.tag}: the train records no FlashInfer pin"
    assert safe.wheel_flashinfer_pin(metadata, content.wheel) == entry.flashinfer
