"""One train tag's patched tree, pristine + patches/series, in a scratch directory (through queue/replay.py),
kept by the digest of its inputs (queue/replay_cache.py: a series replayed once is not replayed again).

The same classification as `rebase` (release.queue.replay: applies as it is, already
upstream, 3-way, conflict; never fuzz), in a throw-away repository that first holds the
tree the series was made on with the series applied there (the head's pristine tree for the
head line, the line's newest train tag for an older line), so `git am --3way` finds the
pre-image blobs the patches name, a second patch on a file included. vendor/ is only ever read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from release.core.errors import ReleaseError, TransportError
from release.core.hashing import sha256_hex
from release.core.layout import UPSTREAM_SUBTREE
from release.model.lines import Line
from release.model.outcome import PatchOutcome, PatchStatus
from release.model.patch import Patch
from release.model.train import DEFAULT_LINE, Train, TrainEntry, digest_carried
from release.model.tree import UpstreamTree
from release.pristine.sources import fetch
from release.queue.replay_cache import replay_tree


@dataclass(frozen=True)
class TagReplay:
    upstream: UpstreamTree
    files: dict[str, bytes]  # the patched subtree (valid when `refusal` is None)
    outcomes: list[PatchOutcome]
    patch_count: int
    patches: tuple[Patch, ...] = ()  # the series replayed, applied or not

    @property
    def carried(self) -> list[Patch]:
        """The patches the replay applied, in order, as their files hold them."""
        applied = set(self.applied)
        return [p for p in self.patches if p.name in applied]

    @property
    def tag(self) -> str:
        return self.upstream.tag

    @property
    def applied(self) -> tuple[str, ...]:
        """The patches the replay applied, in order: what this tag's overlay carries."""
        return tuple(o.name for o in self.outcomes if o.status == PatchStatus.APPLIES)

    @property
    def upstream_here(self) -> list[str]:
        """The patches whose change this tag already has (not replayed here; rebase retires them at the head)."""
        return [o.name for o in self.outcomes if o.status == PatchStatus.UPSTREAM]

    @property
    def conflict(self) -> str | None:
        """Why the series does not replay on this tag (a patch conflicts), or None."""
        conflicts = [o for o in self.outcomes if o.status == PatchStatus.CONFLICT]
        if not conflicts:
            return None
        first = conflicts[0]
        where = ", ".join(c.file.rsplit("/", 1)[-1] for c in first.conflicts) or "its files"
        return (
            f"{first.name} conflicts on {self.tag} in {where}: it neither applies nor 3-way merges "
            "cleanly (never with fuzz)"
        )

    @property
    def nothing(self) -> str | None:
        """Why this tag carries nothing (no patch applied), or None. Only the head may: rebase moves it anywhere."""
        if self.applied or self.conflict:
            return None
        upstream = [o for o in self.outcomes if o.status == PatchStatus.UPSTREAM]
        if upstream:
            names = ", ".join(o.name for o in upstream)
            return f"fixed upstream in {self.tag}; no overlay needed ({names}: {upstream[0].how})"
        return f"its series carries nothing to {self.tag} (every patch is skipped there, or retired before it)"

    def refusal(self, head: bool = False) -> str | None:
        """Why this tag cannot be a train tag as its series stands: a conflict, or (but for the head)
        nothing to carry. A patch whose change the tag already has is no reason: it is not replayed there."""
        return self.conflict or (None if head else self.nothing)

    def patched_hashes(self) -> dict[str, str]:
        return {name: sha256_hex(data) for name, data in sorted(self.files.items())}

    def entry(self, source: str, line: str = DEFAULT_LINE) -> TrainEntry:
        """The train entry this replay proves: where the pristine code came from and both sets of hashes."""
        carried = self.carried
        return replace(
            TrainEntry.of(self.upstream, self.patched_hashes(), line, source, self.applied),
            # A patch that applies here finds its bug's code here: the tag has that bug.
            bugs=tuple(sorted({p.purpose.bug for p in carried if p.purpose.bug})),
            carried_digest=digest_carried((p.name, p.text) for p in carried),
        )


def line_made_on(train: Train, line: Line, tag: str) -> dict[str, bytes]:
    """The tree an older line's variants were made on: `pq carry` makes them on the line's newest train
    tag, read here from its recorded source and held to its recorded sha256. Nothing when `tag` is that
    tag itself (its own tree is the base), when the line has no train tag, or when the read disagrees."""
    entries = [e for e in train.entries if e.line == line.name]
    if not entries or entries[-1].tag == tag:
        return {}
    newest = entries[-1]
    try:
        tree = fetch(newest.tag, newest.recorded_source(), line, lazy=True)
    except TransportError:
        raise  # the network broke, not the tag: exit 4 as from every command
    except ReleaseError:
        return {}  # the tag's own check reports it; without its blobs a replay merges only where git still can
    return tree.files if tree.file_hashes() == newest.pristine else {}


def replay_tag(
    upstream: UpstreamTree, base: dict[str, bytes], patches: list[Patch], root: str = UPSTREAM_SUBTREE
) -> TagReplay:
    """pristine(tag) + series, classified patch by patch, in a scratch repository.

    `root` is the upstream directory the line's files are keyed below; `base` is the tree the
    series was made on (the head's pristine tree, or `line_made_on` for another line): with the
    series applied on it first, it only supplies pre-image blobs for --3way.
    """
    made_on = base if base and base != upstream.files else None  # the tag itself: its own replay writes the blobs
    # Computed once for its inputs (release/queue/replay_cache.py says why the key is all of them).
    replayed = replay_tree(upstream, root, made_on, patches, patches)
    return TagReplay(upstream, replayed.files, replayed.outcomes, len(patches), tuple(patches))
