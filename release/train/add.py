"""`train add`: replay a tag's line series on its pristine modules and record it in patches/train.toml.

What `train add` and `train watch` share: find the release line a tag is on, replay the series
that tag takes (its line's; on the head line a retired patch too where the tag is older than its
Applied-Upstream), refused when a patch conflicts, when nothing is left to carry, or when the
scan data says the tag has a bug none of the applied patches fixes, or when its line skips a bug's
patch with no proof that the tag does without the bug (release/queue/skip_proof.py); and record the entry, with
the patches it carries; train.toml is written in one rename.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from release.core import log
from release.core.errors import EXIT_OK, BadInputError, DirtyVendorError, SourceError, TrainRefusedError
from release.core.hashing import sha256_hex
from release.core.journal import write_atomic
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.core.versions import canonical_tag
from release.model.lines import Line, Lines
from release.model.outcome import PatchStatus
from release.model.source import Source
from release.model.train import DEFAULT_LINE, Train, TrainEntry
from release.model.tree import UpstreamTree
from release.pristine.sources import fetch
from release.queue.bugs import missing_fixes, refuse_missing_fixes
from release.queue.load import is_head, require_accounted
from release.queue.skip_proof import refuse_unproven_skips
from release.queue.snapshot import Checkout
from release.train.replay import TagReplay, line_made_on, replay_tag

DEFAULT_TRAIN_SOURCE = "pypi"


def fetch_on_line(lines: Lines, tag: str, source: Source, name: str | None = None) -> tuple[Line, UpstreamTree]:
    """`tag`'s pristine modules and its release line: the named one, or the first in patches/lines.toml
    whose markers the release has (the scan's rule)."""
    for line in [lines.get(name)] if name else lines.lines:
        try:
            tree = fetch(tag, source, line)
        except SourceError:
            if name:
                raise
            continue
        full = {f"{line.root}/{path}": data for path, data in tree.files.items()}
        if line.present(list(full), full):
            return line, tree
    raise TrainRefusedError(
        f"not adding {tag}: it is on no release line of patches/lines.toml"
        + (f" ({name!r}'s markers are not all there)" if name else ""),
        hint="`python -m release scan --since TAG --until TAG` says which line, if any, a release is on",
    )


class MadeOn:
    """What each older line's variants were made on (line_made_on: its newest train tag's modules), read once per
    line for every tag one command adds, not once per tag."""

    def __init__(self, train: Train) -> None:
        self.train = train
        self._trees: dict[str, dict[str, bytes]] = {}
        self._guard = threading.Lock()

    def __call__(self, line: Line, tag: str) -> dict[str, bytes]:
        entries = [e for e in self.train.entries if e.line == line.name]
        if not entries or entries[-1].tag == tag:
            return {}  # the line's newest tag is its own base; a line without a train tag has none
        with self._guard:
            tree = self._trees.get(line.name)
        if tree is None:
            tree = line_made_on(self.train, line, tag)
            with self._guard:
                tree = self._trees.setdefault(line.name, tree)
        return tree


def replay_for_add(
    checkout: Checkout,
    base: dict[str, bytes],
    tag: str,
    source: Source,
    line_name: str | None = None,
    made_on: MadeOn | None = None,
) -> tuple[str, TagReplay]:
    """Replay `tag` on its line, from the checkout as the command read it (once, for every tag it adds);
    `made_on`: the older lines' bases, shared by every tag the command adds (None: read here)."""
    layout, queue = checkout.layout, checkout.queue
    line, upstream = fetch_on_line(checkout.lines, tag, source, line_name)
    patches = checkout.tag_patches(line, tag)
    if is_head(layout, line):
        replay = replay_tag(upstream, base, patches)
    else:
        # Another line: its own series, and its files keyed below its own root; its variants' blobs are
        # those of the line's newest train tag, where `pq carry` made them.
        made_on = made_on or MadeOn(checkout.train if checkout.train is not None else Train(()))
        replay = replay_tag(upstream, made_on(line, tag), patches, line.root)
    refusal = replay.refusal(head=tag == queue.pin.tag)
    if refusal:
        statuses = {o.status for o in replay.outcomes}
        fixed = PatchStatus.UPSTREAM in statuses and PatchStatus.CONFLICT not in statuses
        raise TrainRefusedError(
            f"not adding {tag}: {refusal}",
            hint=(
                f"users of vLLM {tag} get the fix from vLLM itself; the train is unchanged"
                if fixed
                else f"the train is unchanged; `python -m release rebase {tag} --dry-run --from {source}` "
                "reports the conflict hunk by hunk (docs/patch-queue.md: release lines)"
            ),
        )
    applied = [p for p in patches if p.name in replay.applied]
    missing = missing_fixes(checkout, tag, applied, recorded(checkout, tag))
    refuse_missing_fixes(f"not adding {tag}", tag, missing, list(replay.applied), line.name)
    refuse_unproven_skips(checkout, f"not adding {tag}", tag, line.name, upstream.wheel_sha256)
    if tag == queue.pin.tag:
        vendor = {name: sha256_hex(data) for name, data in layout.vendor_files().items()}
        if replay.patched_hashes() != vendor:
            raise TrainRefusedError(
                f"not adding {tag}: it is the head, and pristine({tag} from {source}) + series is not vendor/",
                hint="`python -m release check` shows how vendor/ drifted",
            )
    return line.name, replay


def recorded(checkout: Checkout, tag: str) -> list[str]:
    """The bugs the train, as the command read it, records for `tag` (none for a tag it does not hold)."""
    entry = checkout.train.get(tag) if checkout.train is not None else None
    return list(entry.bugs) if entry is not None else []


def refuse_unfixable(checkout: Checkout, tag: str, line_name: str | None) -> None:
    """Refuse `tag` on `line_name` (when known) if even every patch its series names leaves a bug it has
    unfixed: what patches/train.toml records of the tag and the scan data say, whatever the scan read."""
    if line_name is None:
        return
    patches = checkout.tag_patches(checkout.line(line_name), tag)
    missing = missing_fixes(checkout, tag, patches, recorded(checkout, tag))
    refuse_missing_fixes(f"not adding {tag}", tag, missing, [p.name for p in patches], line_name)
    refuse_unproven_skips(checkout, f"not adding {tag}", tag, line_name)


def add_one(layout: Layout, base: dict[str, bytes], tag: str, source: Source) -> None:
    """Replay, record and save one tag (what `train watch` does per new release: the checkout is read again
    for each, since the tag before it changed train.toml)."""
    checkout = Checkout.load(layout)
    line_name, replay = replay_for_add(checkout, base, tag, source)
    save(layout, record(checkout.require_train(), replay, source, line_name))


def record(train: Train, replay: TagReplay, source: Source, line: str = DEFAULT_LINE) -> Train:
    # A wheel by its name and sha256, not its directory; the bugs it had and its patch level carried over
    # (one level up when it now carries other patches: a tag's patch level only goes up).
    old = train.get(replay.tag)
    entry = replay.entry(str(source.recorded()), line).after(train.previous(replay.tag))
    changed = sum(1 for name, digest in entry.pristine.items() if entry.patched.get(name) != digest)
    how = "; ".join(f"{o.name.removesuffix('.patch')} {o.how}" for o in replay.outcomes)
    verb = "added" if old is None else ("re-recorded (unchanged)" if old == entry else "re-recorded (changed)")
    raised = old is not None and old.patch_level != entry.patch_level
    level = f"patch level {entry.patch_level}" + (
        f" (was {old.patch_level}: it carries other patches)" if raised and old else ""
    )
    log.out(
        f"{verb} {entry.tag} (line {entry.line}): {where(entry)}; {len(entry.pristine)} files, {changed} patched; "
        f"{how or 'no patch'}; {level}"
    )
    return train.with_entry(entry)


def save(layout: Layout, train: Train) -> None:
    """Replace patches/train.toml in one rename, so a reader (or a crash) never sees half a file; a train that is
    already the file's (a re-record that changes nothing) writes nothing."""
    text = train.dumps().encode("utf-8")
    if not layout.train.is_file() or layout.train.read_bytes() != text:
        write_atomic(layout.train, text)


def where(entry: TrainEntry) -> str:
    if entry.wheel:
        return f"{entry.source}: {entry.wheel}"
    if entry.commit:
        return f"{entry.source} @ {entry.commit[:12]}"
    return entry.source


@dataclass(frozen=True)
class AddOptions:
    """What `train add` was asked: `tags` from `source` (onto `line`); no tags and no source: the whole
    train again, each tag from its recorded source onto its recorded line (`--all`)."""

    tags: tuple[str, ...] = ()
    source: Source | None = None
    line: str | None = None


def add_tags(layout: Layout, options: AddOptions) -> int:
    """`train add`: replay every tag, then write train.toml once, under the repository's lock (all or nothing)."""
    with repo_lock(layout, "train add"):
        return _add(layout, list(options.tags), options.source, options.line)


def _add(layout: Layout, tags: list[str], source: Source | None, line: str | None) -> int:
    tags = [canonical_tag(tag) for tag in tags]  # the one spelling train.toml holds
    if len(set(tags)) != len(tags):
        raise BadInputError(
            f"a tag is named twice: {' '.join(tags)}",
            hint=f"name each tag once: `python -m release train add {' '.join(dict.fromkeys(tags))}`",
        )
    checkout = Checkout.load(layout)  # under the lock: the tags below are replayed from this one read
    queue = checkout.queue
    require_accounted(checkout)
    train = checkout.require_train()
    sources = dict.fromkeys(tags, source) if source else {e.tag: e.recorded_source() for e in train.entries}
    # --all keeps each tag on its recorded line; new tags go on the named line, or the one they match.
    on_line = dict.fromkeys(tags, line) if tags else {e.tag: e.line for e in train.entries}
    tags = tags or train.tags
    if not tags:
        raise BadInputError(
            "the train is empty: nothing to re-record", hint="add a tag: `python -m release train add TAG`"
        )
    for tag in tags:
        # Before any release is read: a tag whose line's series carries no fix for a bug it has is refused.
        refuse_unfixable(checkout, tag, on_line.get(tag))
    found, base = checkout.drift()
    if found:
        # vendor/ is the head of the train and the source of the patches' pre-image blobs.
        raise DirtyVendorError(f"vendor/ is not pristine {queue.pin.tag} + series: " + "; ".join(d.path for d in found))
    made_on = MadeOn(train)  # each older line's base, read once for all its tags
    workers = min(len(tags), 4, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        # All or nothing: every tag is replayed before train.toml is written once.
        replays = list(
            pool.map(lambda tag: replay_for_add(checkout, base, tag, sources[tag], on_line.get(tag), made_on), tags)
        )
    for line_name, replay in replays:
        train = record(train, replay, sources[replay.tag], line_name)
    save(layout, train)
    return EXIT_OK
