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

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from release.core.errors import StaleVariantError, UnrecordedChangeError
from release.model.lines import Line
from release.model.patch import CARRIED_FROM, Patch
from release.model.series import Entry, EntryKind
from release.model.train import TrainEntry, digest_carried


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


class Variants(Protocol):
    """What the variant gate reads from the checkout as the command read it once (release.queue.snapshot.
    Checkout, which imports this module): each line of its own with its entries, and the common patches."""

    def own_lines(self) -> list[Line]: ...

    def entries(self, line: Line) -> list[tuple[Entry, Patch | None]]: ...

    def common(self, name: str) -> Patch | None: ...


def unchecked_variants(checkout: Variants) -> list[Variant]:
    """Every variant of every line's series that is stale or hand-made, in line and series order."""
    found: list[Variant] = []
    for line in checkout.own_lines():
        for entry, variant in checkout.entries(line):
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
            patch = checkout.common(common)
            if patch is not None and made_from != fingerprint(patch):
                found.append(Variant(where, line.name, common, VariantState.STALE, made_from, fingerprint(patch)))
    return found


def stale_variants(checkout: Variants, paths: Iterable[str] | None = None) -> list[Variant]:
    """The stale variants (only those at `paths`, patches/lines/LINE/NAME, when given)."""
    wanted = set(paths) if paths is not None else None
    return [
        v
        for v in unchecked_variants(checkout)
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
