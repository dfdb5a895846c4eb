"""One train tag's patched tree: its pristine subtree + patches/series, made in a scratch directory.

The same classification as `rebase` (release.queue.replay: applies as it is, already
upstream, 3-way, conflict; never fuzz), in a throw-away repository that first holds the
head's pristine tree, so `git am --3way` finds the pre-image blobs the patches name.
vendor/ is only ever read.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from release.core.git import WorkRepo
from release.core.hashing import sha256_hex
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.model.outcome import PatchOutcome, PatchStatus
from release.model.patch import Patch
from release.model.train import DEFAULT_LINE, TrainEntry
from release.model.tree import UpstreamTree
from release.queue.drift import unapply
from release.queue.load import Queue
from release.queue.replay import Replay, replay_series


@dataclass(frozen=True)
class TagReplay:
    upstream: UpstreamTree
    files: dict[str, bytes]  # the patched subtree (valid when `refusal` is None)
    outcomes: list[PatchOutcome]
    patch_count: int

    @property
    def tag(self) -> str:
        return self.upstream.tag

    @property
    def refusal(self) -> str | None:
        """Why this tag cannot carry the series as it stands, or None when every patch applied."""
        conflicts = [o for o in self.outcomes if o.status == PatchStatus.CONFLICT]
        if conflicts:
            first = conflicts[0]
            where = ", ".join(c.file.rsplit("/", 1)[-1] for c in first.conflicts) or "its files"
            return (
                f"{first.name} conflicts on {self.tag} in {where}: it neither applies nor 3-way merges "
                "cleanly (never with fuzz)"
            )
        upstream = [o for o in self.outcomes if o.status == PatchStatus.UPSTREAM]
        if upstream and len(upstream) == self.patch_count:
            names = ", ".join(o.name for o in upstream)
            return f"fixed upstream in {self.tag}; no overlay needed ({names}: {upstream[0].how})"
        if upstream:
            names = ", ".join(o.name for o in upstream)
            return (
                f"{names} is already upstream in {self.tag} (fixed upstream in {self.tag}); a train tag carries "
                "the whole series, so this tag needs a release line of its own"
            )
        return None

    def patched_hashes(self) -> dict[str, str]:
        return {name: sha256_hex(data) for name, data in sorted(self.files.items())}

    def entry(self, source: str, line: str = DEFAULT_LINE) -> TrainEntry:
        """The train entry this replay proves: where the pristine code came from and both sets of hashes."""
        return TrainEntry.of(self.upstream, self.patched_hashes(), line, source)


def head_pristine(layout: Layout, queue: Queue) -> dict[str, bytes]:
    """The head's pristine subtree, recovered from vendor/ by undoing the series (offline).

    Used only as the source of the patches' pre-image blobs; every result is checked
    against recorded hashes, so a drifted vendor/ cannot slip a wrong tree through.
    """
    recovered, _blocked = unapply(layout.vendor_files(), queue.patches)
    return recovered


def replay_tag(
    upstream: UpstreamTree, base: dict[str, bytes], patches: list[Patch], root: str = UPSTREAM_SUBTREE
) -> TagReplay:
    """pristine(tag) + series, classified patch by patch, in a scratch repository.

    `root` is the upstream directory the line's files are keyed below; `base` (the head's
    pristine tree, or nothing for another line) only supplies pre-image blobs for --3way.
    """
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-train-") as tmp:
        work = Path(tmp)
        repo = WorkRepo.create(work / "repo", root)
        if base:
            repo.commit_subtree(base, "head pristine: the pre-image blobs for --3way")
        repo.commit_subtree(upstream.files, f"vllm {upstream.tag} (pristine)")
        replay = Replay()
        replay_series(repo, work, patches, replay, upstream)
        files = repo.subtree_files()
    return TagReplay(upstream, files, replay.outcomes, len(patches))
