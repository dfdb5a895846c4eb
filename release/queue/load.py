"""The patch queue on disk: pin, series and patches, loaded and validated together; each line's series
and each tag's.

What a tag replays (`tag_patches`): on the head line, patches/series in order, a `retired` entry only
on a tag older than the patch's `Applied-Upstream:` (upstream has it from there on, so retiring it at
the head takes it from no older tag); on another line, its own series: its variants and the common
patches it `take`s (a retired one likewise only before its upstream release), none it `skip`s.
Every line's series accounts for every common patch (`require_accounted`): silence is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from release.core.errors import MalformedSeriesError, MisorderedLineError, SilentLineError
from release.core.layout import Layout
from release.core.versions import parse_version
from release.model.lines import Line, Lines
from release.model.patch import APPLIED_UPSTREAM, UPSTREAM_SUBTREE_PREFIX, Patch
from release.model.pin import Pin
from release.model.series import RETIRED_DIR, Entry, EntryKind, Series


@dataclass(frozen=True)
class Queue:
    pin: Pin
    series: Series
    patches: list[Patch]  # the series' patches as the head applies them (its `retired` entries left out)

    @classmethod
    def load(cls, layout: Layout, load: PatchLoader = Patch.load) -> Queue:
        """`load`: how a patch file is read (a Checkout's: once per command)."""
        pin = Pin.load(layout.upstream_toml)
        if not layout.patches.is_dir():
            raise MalformedSeriesError(
                f"{layout.patches} is {'not a directory' if layout.patches.exists() else 'missing'}",
                hint="restore patches/ from git (`git checkout -- patches`)",
            )
        series = Series.load(layout.series)
        patches = [load(layout.patches / name, (UPSTREAM_SUBTREE_PREFIX,)) for name in series.names]
        return cls(pin, series, patches)


# How a patch file is read: Patch.load, or a Checkout's `patch` (each file once per command).
PatchLoader = Callable[[Path, tuple[str, ...]], Patch]


class Checkout(Protocol):
    """What this module reads from a checkout read once (release.queue.snapshot.Checkout, which imports this
    module): the queue, the lines, and each line's entries with their patches."""

    @property
    def layout(self) -> Layout: ...

    @property
    def queue(self) -> Queue: ...

    @property
    def lines(self) -> Lines: ...

    def entries(self, line: Line) -> list[tuple[Entry, Patch | None]]: ...


def older(tag: str, than: str) -> bool:
    a, b = parse_version(tag), parse_version(than)
    if a is None or b is None:
        raise MalformedSeriesError(f"cannot order the tags {tag!r} and {than!r}")
    return a[0].key < b[0].key


def replays_on(patch: Patch, tag: str | None) -> bool:
    """Does `tag` replay this patch? Always, unless it is upstream from a tag at or before `tag`
    (None: the head as vendor/ holds it, which replays only what is not retired)."""
    upstream = patch.applied_upstream
    if upstream is None:
        return True
    return tag is not None and older(tag, upstream)


def is_head(layout: Layout, line: Line) -> bool:
    """The head line takes patches/series itself (vendor/ holds it)."""
    return line.series_path(layout.root) == layout.series


def line_series(layout: Layout, line: Line) -> Series:
    if is_head(layout, line):
        return Series.load(layout.series)
    return Series.load(line.series_path(layout.root), common=layout.patches)


def entry_patch(layout: Layout, line: Line, entry: Entry, load: PatchLoader = Patch.load) -> Patch | None:
    """The patch file an entry names (None for a `skip`): a variant in the line's folder, a common patch
    in patches/ (or, once retired, in patches/retired/); `load` reads it."""
    if entry.kind == EntryKind.SKIP:
        return None
    prefixes = line.prefixes
    if is_head(layout, line):
        folder = layout.retired if entry.kind == EntryKind.RETIRED else layout.patches
        return load(folder / entry.name, prefixes)
    if entry.kind == EntryKind.PATCH:
        return load(line.patch_dir(layout.root) / entry.name, prefixes)
    common = layout.patches / entry.name
    return load(common if common.is_file() else layout.patches / RETIRED_DIR / entry.name, prefixes)


def line_entries(layout: Layout, line: Line) -> list[tuple[Entry, Patch | None]]:
    """Each entry of a line's series with the patch file it names (None for a `skip`), loaded once."""
    return [(entry, entry_patch(layout, line, entry)) for entry in line_series(layout, line).entries]


def tag_patches(layout: Layout, line: Line, tag: str | None) -> list[Patch]:
    """The patches `tag` of `line` replays, in series order (None: what vendor/ holds, on the head line)."""
    return for_tag(line_entries(layout, line), tag)


def for_tag(entries: Iterable[tuple[Entry, Patch | None]], tag: str | None) -> list[Patch]:
    """Of a line's entries (line_entries), the patches `tag` replays, in series order."""
    out = []
    for entry, patch in entries:
        # The head (None) holds every patch of the active series: an upstream backport in it says with
        # Applied-Upstream: which release has it, which retires it once the head is there (rebase).
        if patch is not None and (replays_on(patch, tag) or (tag is None and entry.kind != EntryKind.RETIRED)):
            out.append(patch)
    return out


def line_patches(layout: Layout, line: Line) -> list[Patch]:
    """The series a line takes, whatever the tag: its variants and takes; the head's active patches."""
    return tag_patches(layout, line, None) if is_head(layout, line) else [
        patch for entry in line_series(layout, line).entries if (patch := entry_patch(layout, line, entry))
    ]  # fmt: skip


def account(entries: Iterable[tuple[Entry, Patch | None]]) -> dict[str, Entry]:
    """What a line's series (its `entries`: Checkout.entries, or line_entries) says about each common patch it
    names: a `take`, a `skip`, or its variant (by the variant's `Varies:`), keyed by the common patch's name."""
    said: dict[str, Entry] = {}
    # A variant or a take is loaded, so one that reaches outside the line's modules is refused here.
    for entry, patch in entries:
        common = patch.varies if patch is not None and entry.kind == EntryKind.PATCH else None
        said[common or entry.name] = entry
    return said


def _other_lines(checkout: Checkout) -> list[Line]:
    layout = checkout.layout
    if not layout.lines.is_file():
        return []
    return [line for line in checkout.lines.lines if not is_head(layout, line)]


def silent_lines(checkout: Checkout) -> list[tuple[Line, Path, str]]:
    """(line, its series file, common patch) for every common patch a line's series says nothing about."""
    found = []
    for line in _other_lines(checkout):
        said = account(checkout.entries(line))
        found += [
            (line, line.series_path(checkout.layout.root), p.name) for p in checkout.queue.patches if p.name not in said
        ]
    return found


def misordered_lines(checkout: Checkout) -> list[tuple[Line, Path, list[str], list[str]]]:
    """(line, its series file, the order it replays the common patches in, patches/series' order of them) for
    every line whose takes and variants replay the common patches in another order than patches/series: after
    a reorder of patches/series, a later patch on a file an earlier one changed would merge on another base."""
    common = [entry.name for entry in checkout.queue.series.entries]
    found = []
    for line in _other_lines(checkout):
        said = account(checkout.entries(line))
        replayed = [name for name, entry in said.items() if entry.kind != EntryKind.SKIP]
        ours = [name for name in replayed if name in common]
        wanted = [name for name in common if name in ours]
        if ours != wanted:
            found.append((line, line.series_path(checkout.layout.root), ours, wanted))
    return found


def require_accounted(checkout: Checkout) -> None:
    """Refuse a release line that is silent about a common patch, or replays the common patches in another
    order than patches/series (exit 2, naming both)."""
    layout = checkout.layout
    misordered = misordered_lines(checkout)
    if misordered:
        shown = "; ".join(
            f"line {line.name} ({path.relative_to(layout.root).as_posix()}) replays {', '.join(ours)}, but "
            f"patches/series orders them {', '.join(wanted)}"
            for line, path, ours, wanted in misordered
        )
        raise MisorderedLineError(f"{shown}: a line's series keeps the order of patches/series")
    silent = silent_lines(checkout)
    if silent:
        shown = "; ".join(
            f"line {line.name} ({path.relative_to(layout.root).as_posix()}) is silent about {name}"
            for line, path, name in silent
        )
        raise SilentLineError(
            f"{shown}: a line's series takes each common patch as it is, takes a variant, or skips it with a reason"
        )


def named_patch(layout: Layout, line: Line, name: str, load: PatchLoader = Patch.load) -> Patch | None:
    """A patch a train entry records by name: the line's variant, a common patch, or a retired one (`load`
    reads it: a Checkout's reads each file once per command)."""
    places = [] if is_head(layout, line) else [line.patch_dir(layout.root)]
    for folder in [*places, layout.patches, layout.retired]:
        if (folder / name).is_file():
            return load(folder / name, line.prefixes)
    return None


def rebase_patches(layout: Layout, queue: Queue, tag: str, load: PatchLoader) -> list[Patch]:
    """What a rebase onto `tag` replays: patches/series in order, and a retired patch where `tag` is older
    than its Applied-Upstream, without that trailer (if it applies there, it returns to the series as it was);
    `load` reads a retired patch (the rebase's Checkout: once per command)."""
    out = []
    for entry in queue.series.entries:
        if entry.kind == EntryKind.RETIRED:
            patch = load(layout.retired / entry.name, (UPSTREAM_SUBTREE_PREFIX,))
            if replays_on(patch, tag):
                out.append(patch.without_trailer(APPLIED_UPSTREAM))
        else:
            out.append(next(p for p in queue.patches if p.name == entry.name))
    return out
