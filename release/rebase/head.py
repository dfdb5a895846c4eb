"""The head's entry moves with `rebase`: the new head is recorded in the same swap as vendor/.

The old head's entry stays (it is still a release we ship); the new head's entry is
written, or replaced, from exactly what the rebase installs into vendor/.
"""

from __future__ import annotations

from dataclasses import dataclass

from release.core.hashing import sha256_hex
from release.core.layout import Layout
from release.model.train import Train, TrainEntry
from release.model.tree import UpstreamTree


@dataclass(frozen=True)
class MovedHead:
    text: str | None  # the new patches/train.toml; None: this checkout keeps no train
    stranded: list[str]  # other tags that still record a patch this rebase retired


def move_head(layout: Layout, upstream: UpstreamTree, vendor: dict[str, bytes], retired: list[str]) -> MovedHead:
    if not layout.train.is_file():
        return MovedHead(None, [])
    train = Train.load(layout.train)
    entry = TrainEntry.of(upstream, {name: sha256_hex(data) for name, data in sorted(vendor.items())})
    # A retired patch leaves the series, but the other tags' trees were recorded with it.
    stranded = [tag for tag in train.tags if tag != upstream.tag] if retired else []
    return MovedHead(train.with_entry(entry).dumps(), stranded)
