"""The head's entry moves with `rebase`: the new head is recorded in the same swap as vendor/.

The old head's entry stays (it is still a release we ship); the new head's entry is
written, or replaced, from exactly what the rebase installs into vendor/. A patch the rebase
retires strands no other tag: each tag older than its Applied-Upstream still replays it
(release/queue/load.py), so the train's other entries stay true.
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


def move_head(layout: Layout, upstream: UpstreamTree, vendor: dict[str, bytes], applied: list[str]) -> MovedHead:
    if not layout.train.is_file():
        return MovedHead(None)
    train = Train.load(layout.train)
    hashes = {name: sha256_hex(data) for name, data in sorted(vendor.items())}
    entry = TrainEntry.of(upstream, hashes, patches=tuple(applied))
    return MovedHead(train.with_entry(entry).dumps())
