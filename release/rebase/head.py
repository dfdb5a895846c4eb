"""The head's entry moves with `rebase`: the new head is recorded in the same swap as vendor/.

The old head's entry stays (it is still a release we ship); the new head's entry is
written, or replaced, from exactly what the rebase installs into vendor/. A patch the rebase
retires strands no other tag: each tag older than its Applied-Upstream still replays it
(release/queue/load.py), so the train's other entries stay true.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from release.core.files import present
from release.core.hashing import sha256_hex
from release.model.patch import Patch
from release.model.train import TrainEntry, digest_carried
from release.model.tree import UpstreamTree
from release.queue.snapshot import Checkout


@dataclass(frozen=True)
class MovedHead:
    text: str | None  # the new patches/train.toml; None: this checkout keeps no train


def move_head(
    checkout: Checkout,
    upstream: UpstreamTree,
    vendor: dict[str, bytes],
    applied: list[str],
    texts: dict[str, str] | None = None,
) -> MovedHead:
    """The train with the new head's entry; `texts` are the applied patches as the swap writes them (the
    digest of what the head carries), and the entry keeps the bugs and the patch level its tag had (one
    level up when it carries other patches). `checkout`: the train as the rebase read it, before its swap."""
    if not present(checkout.layout.train):
        return MovedHead(None)
    train = checkout.require_train()
    hashes = {name: sha256_hex(data) for name, data in sorted(vendor.items())}
    carried = [Patch(name, (texts or {}).get(name, "")) for name in applied]
    entry = replace(
        TrainEntry.of(upstream, hashes, patches=tuple(applied)),
        bugs=tuple(sorted({p.purpose.bug for p in carried if p.purpose.bug})),
        carried_digest=digest_carried((p.name, p.text) for p in carried) if texts is not None else "",
    ).after(train.previous(upstream.tag))
    return MovedHead(train.with_entry(entry).dumps())
