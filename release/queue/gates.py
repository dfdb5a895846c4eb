"""What the gates (`check`, `train add`, `build`, `publish`) hold the release lines and train tags to,
from facts of the checkout alone, never from how much the last scan read.

- A line's variant that `pq carry` made names, in its `Carried-From:` trailer, the common patch it was
  carried from and that patch's digest (`fingerprint`). When patches/ holds another version of that patch,
  the variant is stale: the line's tags would ship the old change while the head's ship the new one.
  `check` says so (exit 2) with the `pq carry` to run; `build` and `publish` refuse it. A hand-made
  variant (no `Carried-From:`) cannot be checked that way, and `check` says so once per variant.
- What a tag carries is digested (release.model.train.digest_carried) and recorded with its patch level
  in patches/train.toml; a build of a tag whose carried patches differ from the recorded digest is
  refused until `train add` records them, at a level above the one before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from release.core.errors import StaleVariantError, UnrecordedChangeError
from release.core.layout import Layout
from release.model.lines import Line
from release.model.patch import APPLIED_UPSTREAM, CARRIED_FROM, Patch
from release.model.series import Entry, EntryKind
from release.model.train import TrainEntry, digest_carried
from release.queue.load import Checkout, entry_patch, is_head, own_line_series


def fingerprint(patch: Patch) -> str:
    """What a carried variant remembers of the common patch it was made from: its name and the digest of what
    it says and changes (Patch.change_digest), so a refresh by `rebase` leaves the variant current."""
    return f"{patch.name} sha256:{patch.change_digest[:16]}"


class VariantState(StrEnum):
    STALE = "stale"  # carried from another version of the common patch than patches/ holds
    HAND_MADE = "hand-made"  # no Carried-From: nothing says which version of the common patch it follows


@dataclass(frozen=True)
class Variant:
    """One line's variant the gates cannot vouch for."""

    path: str  # in the checkout, patches/lines/<line>/<name> (or the variant's name in a wheel)
    line: str
    common: str  # the common patch it varies
    state: VariantState
    carried_from: str = ""  # its Carried-From: (stale only)
    current: str = ""  # the common patch's fingerprint now (stale only)

    def sentence(self) -> str:
        if self.state == VariantState.HAND_MADE:
            return (
                f"{self.path} (line {self.line}) varies {self.common} and was made by hand (no {CARRIED_FROM}:): "
                "not checked against the common patch"
            )
        return (
            f"{self.path} (line {self.line}) is stale: carried from {self.carried_from}, but patches/ holds "
            f"{self.current}; run `python -m release pq carry {self.common}`"
        )


def common_now(layout: Layout, name: str) -> Patch | None:
    """The common patch as `pq carry` reads it: patches/NAME, or, once retired, patches/retired/NAME without
    the Applied-Upstream: trailer retiring added (None: no such patch, e.g. dropped)."""
    if (layout.patches / name).is_file():
        return Patch.load(layout.patches / name)
    if (layout.retired / name).is_file():
        return Patch.load(layout.retired / name).without_trailer(APPLIED_UPSTREAM)
    return None


def _own_line_entries(
    layout: Layout, checkout: Checkout | None
) -> Iterator[tuple[Line, list[tuple[Entry, Patch | None]]]]:
    """Each line with a series file of its own, with its entries' patches (from `checkout` when given)."""
    if checkout is None:
        for line, _path, series in own_line_series(layout):
            yield (
                line,
                [(e, entry_patch(layout, line, e) if e.kind == EntryKind.PATCH else None) for e in series.entries],
            )
        return
    if not layout.lines.is_file():  # as own_line_series: no lines.toml, no line of its own
        return
    for line in checkout.lines.lines:
        if not is_head(layout, line) and line.series_path(layout.root).is_file():
            yield line, checkout.entries(line)


def unchecked_variants(layout: Layout, checkout: Checkout | None = None) -> list[Variant]:
    """Every variant of every line's series that is stale or hand-made, in line and series order."""
    found: list[Variant] = []
    for line, entries in _own_line_entries(layout, checkout):
        for entry, variant in entries:
            if entry.kind != EntryKind.PATCH:
                continue
            common = variant.varies if variant is not None else None
            if variant is None or common is None:
                continue
            where = f"patches/lines/{line.name}/{entry.name}"
            made_from = variant.carried_from
            if not made_from:
                found.append(Variant(where, line.name, common, VariantState.HAND_MADE))
                continue
            patch = common_now(layout, common)
            if patch is not None and made_from != fingerprint(patch):
                found.append(Variant(where, line.name, common, VariantState.STALE, made_from, fingerprint(patch)))
    return found


def stale_variants(
    layout: Layout, paths: Iterable[str] | None = None, checkout: Checkout | None = None
) -> list[Variant]:
    """The stale variants (only those at `paths`, patches/lines/LINE/NAME, when given)."""
    wanted = set(paths) if paths is not None else None
    return [
        v
        for v in unchecked_variants(layout, checkout)
        if v.state == VariantState.STALE and (wanted is None or v.path in wanted)
    ]


def refuse_stale(what: str, stale: list[Variant]) -> None:
    if stale:
        raise StaleVariantError(what=what, stale=[v.sentence() for v in stale], commons=[v.common for v in stale])


def refuse_unrecorded(what: str, entry: TrainEntry, patches: Iterable[Patch]) -> None:
    """Refuse a build of `entry`'s tag when it would carry other patches than the train records for its level."""
    carried = list(patches)
    if entry.carried_digest and entry.carried_digest != digest_carried((p.name, p.text) for p in carried):
        names = ", ".join(p.name for p in carried) or "no patch"
        raise UnrecordedChangeError(
            f"{what}: {entry.tag} now carries {names}, not what patches/train.toml records for its patch level "
            f"{entry.patch_level} ({entry.carried_digest[:19]}…): a patch was added, changed, dropped or retired since",
            hint=f"re-record it: `python -m release train add {entry.tag}` (or `--all`) records what it carries "
            f"and raises its level to {entry.patch_level + 1}; nothing was built",
        )
