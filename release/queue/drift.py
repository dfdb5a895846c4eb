"""Undo the series on a copy of vendor/ to recover pristine, and list every file that drifted."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from release.core.errors import DirtyVendorError
from release.core.hashing import sha256_hex
from release.core.layout import Layout
from release.queue.load import Queue
from release.queue.replay import unapply

# ------------------------------------------------------------- undoing the queue


class DriftKind(StrEnum):
    """How one file of vendor/ differs from pristine + series (`check` prints the value)."""

    EDITED = "edited"
    ADDED = "added"
    MISSING = "missing"
    PATCH_DOES_NOT_REVERSE = "patch-does-not-reverse"
    MODE = "mode"
    SYMLINK = "symlink"
    NOT_A_FILE = "not-a-file"


@dataclass(frozen=True)
class Drift:
    """One file of vendor/ that is not pristine + series."""

    path: str
    kind: DriftKind
    detail: str

    def line(self) -> str:
        return f"{self.kind:<24} {self.path}  ({self.detail})"


def drift(layout: Layout, queue: Queue) -> tuple[list[Drift], dict[str, bytes]]:
    """Every way vendor/ differs from pristine(UPSTREAM.toml) + series, file by file.

    Also returns the recovered pristine files (valid wherever no drift was found).
    """
    return vendor_drift(layout, queue, layout.vendor_files())


def vendor_drift(layout: Layout, queue: Queue, vendor: dict[str, bytes]) -> tuple[list[Drift], dict[str, bytes]]:
    """`drift` of vendor/'s subtree as the caller read it (Layout.vendor_files): a Checkout reads it once."""
    pristine, blocked = unapply(vendor, queue.patches)
    found: list[Drift] = []
    odd = odd_entries(layout.subtree)
    for name in sorted(set(queue.pin.files) | set(pristine) | set(blocked) | set(odd)):
        expected = queue.pin.files.get(name)
        if name in odd:
            found.append(odd[name])
        elif name in blocked and name not in vendor:
            # Reversing needs the file; without it the patch that touches it cannot be undone.
            found.append(Drift(name, DriftKind.MISSING, f"{blocked[name]} creates or changes it, but it is gone"))
        elif name in blocked:
            found.append(
                Drift(
                    name,
                    DriftKind.PATCH_DOES_NOT_REVERSE,
                    f"{blocked[name]} no longer matches this file; it was edited",
                )
            )
        elif expected is None:
            found.append(Drift(name, DriftKind.ADDED, "not in the pinned upstream subtree nor created by a patch"))
        elif name not in pristine:
            found.append(Drift(name, DriftKind.MISSING, f"upstream {queue.pin.tag} has it"))
        elif sha256_hex(pristine[name]) != expected:
            found.append(Drift(name, DriftKind.EDITED, f"differs from upstream {queue.pin.tag} + series"))
    return found, pristine


def odd_entries(subtree: Path) -> dict[str, Drift]:
    """What a byte comparison cannot see: links (never followed), executable bits, special files.

    Every vendored file is a regular, non-executable file: `rebase` writes them so and the
    wheel ships them so. Anything else is a change by hand.
    """
    found: dict[str, Drift] = {}
    if not subtree.is_dir():
        return found
    pending = [(subtree, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                name = prefix + entry.name
                if entry.name == "__pycache__" or entry.name.endswith(".pyc"):
                    continue
                if entry.is_symlink():
                    target = Path(entry.path).readlink()
                    found[name] = Drift(
                        name, DriftKind.SYMLINK, f"a symbolic link to {target}, not a file; never followed"
                    )
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((Path(entry.path), name + "/"))
                elif not entry.is_file(follow_symlinks=False):
                    found[name] = Drift(name, DriftKind.NOT_A_FILE, "neither a regular file nor a directory")
                elif entry.stat(follow_symlinks=False).st_mode & 0o111:
                    mode = oct(stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode))
                    found[name] = Drift(name, DriftKind.MODE, f"mode {mode}: executable, vendored files are not")
    return found


def pristine_of(tag: str, found: list[Drift], pristine: dict[str, bytes]) -> dict[str, bytes]:
    """The pinned tag's pristine subtree that `drift` recovered from vendor/; refused where it found drift
    (hand edits: a rebase, an import or an export of the queue would lose them)."""
    if found:
        listing = "; ".join(f"{d.path} ({d.kind})" for d in found)
        raise DirtyVendorError(f"vendor/ is not pristine {tag} + series: {listing}")
    return pristine
