"""One read of the checkout per command: the queue, the release lines, the train, the scan data, the pins.

A command loads a `Checkout` once, under its lock, and hands it to its stages, which read the facts
from it and never from the files (no stage takes `None` for it and reads them itself). Every file of
patches/ and vendor/'s pins is read at most once per command (tests/cli/test_checkout_read_once.py counts it
for `check`, `build --all` and `publish`; tests/cli/test_pq_reads_once.py for `pq drop` and `pq export
--check`): a patch is read once, whichever stage first asks for it (the queue, a line's series, the known
bugs, the common patch a variant varies), and kept. What not every
stage needs is read the first time one asks for it: each line's series with the patch files it names (a
line no stage asks about is not read, so a broken line is reported by the stage that needs it), the
known bugs, the scan data, VERIFIED.toml, vendor/'s subtree with its drift and the pristine tree recovered
from it (the series undone once), and the files of a folder a `pq` command rewrites (patches/, a line's).
A command that writes the checkout and must read what it wrote loads a new Checkout of it, and says why.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from release.core.errors import MalformedPatchError
from release.core.files import present, read_text
from release.core.layout import Layout, read_tree
from release.core.versions import canonical_tag
from release.model.lines import Line, Lines, read_lines
from release.model.patch import APPLIED_UPSTREAM, UPSTREAM_SUBTREE_PREFIX, Patch
from release.model.series import Entry, Series
from release.model.train import Train, TrainEntry
from release.queue.bugs import patch_folders, scan_data
from release.queue.drift import Drift, pristine_of, vendor_drift
from release.queue.load import Queue, entry_patch, for_tag, is_head, line_series
from release.queue.regression import BugTest, bug_patches, bug_tests
from release.queue.verified import VerifiedFlashInfer, read_verified


@dataclass(frozen=True)
class Checkout:
    layout: Layout
    queue: Queue  # the pin, patches/series and its patches
    lines_toml: Lines | None  # patches/lines.toml (None: the checkout has none; `lines` says so)
    train: Train | None  # patches/train.toml (None: the checkout has none, or no lines.toml)
    _texts: dict[Path, str] = field(default_factory=dict, compare=False, repr=False)
    _series: dict[str, Series] = field(default_factory=dict, compare=False, repr=False)
    _entries: dict[str, list[tuple[Entry, Patch | None]]] = field(default_factory=dict, compare=False, repr=False)
    _once: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    _guard: threading.RLock = field(default_factory=threading.RLock, compare=False, repr=False)

    @classmethod
    def load(cls, layout: Layout) -> Checkout:
        """Read the checkout, in the order the stages did: the queue, the lines, the train (the rest when a
        stage first asks for it). A missing lines.toml or train.toml is refused by the stage that needs it."""
        texts: dict[Path, str] = {}
        queue = Queue.load(layout, load=lambda path, prefixes: _patch(texts, path, prefixes))
        lines = read_lines(layout.lines) if present(layout.lines) else None
        names = [line.name for line in lines.lines] if lines is not None else None
        train = Train.load(layout.train, names) if names is not None and present(layout.train) else None
        return cls(layout, queue, lines, train, texts)

    def patch(self, path: Path, prefixes: tuple[str, ...] = (UPSTREAM_SUBTREE_PREFIX,)) -> Patch:
        """The patch file at `path`, validated against `prefixes`: its text read once per command."""
        with self._guard:
            return _patch(self._texts, path, prefixes)

    @property
    def lines(self) -> Lines:
        """patches/lines.toml; a checkout without it is refused as reading it refuses it."""
        return self.lines_toml if self.lines_toml is not None else read_lines(self.layout.lines)

    def require_train(self) -> Train:
        """The train; a checkout without patches/train.toml is refused as Train.load refuses it."""
        return self.train if self.train is not None else Train.load(self.layout.train, self.line_names())

    def line_names(self) -> list[str]:
        return [line.name for line in self.lines.lines]

    def train_entry(self, tag: str) -> TrainEntry | None:
        """The train's entry of `tag` (None: no train, or a tag it does not hold)."""
        return self.train.get(tag) if self.train is not None else None

    def recorded_bugs(self, tag: str) -> list[str]:
        """The bugs patches/train.toml records for `tag` (none for a tag it does not hold)."""
        entry = self.train_entry(canonical_tag(tag))
        return list(entry.bugs) if entry is not None else []

    @property
    def scan(self) -> dict[str, Any] | None:
        """The scan data (None: none, or not the scan's document), read once, when first asked for."""
        with self._guard:
            if "scan" not in self._once:
                self._once["scan"] = scan_data(self.layout)
            found: dict[str, Any] | None = self._once["scan"]
            return found

    @property
    def verified(self) -> VerifiedFlashInfer:
        """vendor/vllm_fused_moe/VERIFIED.toml, read once, when first asked for."""
        with self._guard:
            if "verified" not in self._once:
                self._once["verified"] = read_verified(self.layout.verified_toml)
            found: VerifiedFlashInfer = self._once["verified"]
            return found

    def known_bugs(self) -> dict[str, str]:
        """{bug id: title} of every patch of the queue: patches/, patches/retired/ and every line's variants,
        each file read once (shared with every other stage that loads it)."""
        with self._guard:
            if "known" not in self._once:
                found: dict[str, str] = {}
                for folder in patch_folders(self.layout):
                    for path in sorted(folder.glob("*.patch")):
                        try:
                            purpose = Patch(path.name, self._text(path)).purpose
                        except (OSError, UnicodeDecodeError):
                            continue  # loading the queue says what is wrong with it
                        if purpose.bug:
                            found.setdefault(purpose.bug, purpose.title)
                self._once["known"] = found
            known: dict[str, str] = self._once["known"]
            return known

    def bug_patches(self) -> list[Patch]:
        """The patches that fix a bug (release.queue.regression.bug_patches), each file read once."""
        with self._guard:
            if "bug_patches" not in self._once:
                self._once["bug_patches"] = bug_patches(self.layout, self.queue, self.patch)
            found: list[Patch] = self._once["bug_patches"]
            return found

    def bug_tests(self, line: str) -> list[BugTest]:
        """Each bug of the queue with its regression test on `line` (release.queue.regression.bug_tests), once
        per line: publish asks for it per wheel."""
        with self._guard:
            key = f"bug_tests {line}"
            if key not in self._once:
                self._once[key] = bug_tests(self.layout, line, self.queue, self.patch)
            found: list[BugTest] = self._once[key]
            return found

    def common(self, name: str) -> Patch | None:
        """The common patch `name` as `pq carry` reads it: patches/NAME, or, once retired, patches/retired/NAME
        without the Applied-Upstream: trailer retiring added (None: no such patch, e.g. dropped)."""
        layout = self.layout
        if (layout.patches / name).is_file():
            return self.patch(layout.patches / name)
        if (layout.retired / name).is_file():
            return self.patch(layout.retired / name).without_trailer(APPLIED_UPSTREAM)
        return None

    def drift(self) -> tuple[list[Drift], dict[str, bytes]]:
        """How vendor/ differs from pristine + series, and the pristine tree recovered from it
        (release.queue.drift.drift): vendor/ read and the series undone once, for every stage that asks."""
        with self._guard:
            if "drift" not in self._once:
                self._once["drift"] = vendor_drift(self.layout, self.queue, self.vendor_files())
            found: tuple[list[Drift], dict[str, bytes]] = self._once["drift"]
            return found

    def pristine(self) -> dict[str, bytes]:
        """The pinned tag's pristine subtree recovered from vendor/, refused where vendor/ has drifted
        (release.queue.drift.pristine_of), from the one `drift` of the command."""
        return pristine_of(self.queue.pin.tag, *self.drift())

    def vendor_files(self) -> dict[str, bytes]:
        """vendor/'s subtree as the command found it (Layout.vendor_files), read once; a copy the caller may change."""
        with self._guard:
            if "vendor" not in self._once:
                self._once["vendor"] = self.layout.vendor_files()
            return dict(self._once["vendor"])

    def tree(self, folder: Path) -> dict[str, bytes]:
        """The regular files under `folder` (release.core.layout.read_tree: patches/, a line's folder) as the
        command found them, read once: what a command that rewrites the folder starts from and compares
        with. A copy the caller may change."""
        with self._guard:
            key = f"tree {folder}"
            if key not in self._once:
                self._once[key] = read_tree(folder)
            return dict(self._once[key])

    def text(self, path: Path) -> str:
        """A patch file's text as it is, not validated (a hand-made variant half-written), read once."""
        with self._guard:
            return self._text(path)

    def line(self, name: str) -> Line:
        return self.lines.get(name)

    def head_line(self) -> Line | None:
        """The release line whose series is patches/series (None: lines.toml names none)."""
        return next((line for line in self.lines.lines if is_head(self.layout, line)), None)

    def own_line_series(self) -> list[tuple[Line, Path, Series]]:
        """Each release line with a series file of its own (every line but the head's), its path and its series."""
        return [(line, line.series_path(self.layout.root), self.series(line)) for line in self.own_lines()]

    def entry_patch(self, line: Line, entry: Entry) -> Patch | None:
        """The patch an entry of `line`'s series names (None for a `skip`): release.queue.load.entry_patch,
        the file read once."""
        return entry_patch(self.layout, line, entry, self.patch)

    def own_lines(self) -> list[Line]:
        """Each release line with a series file of its own (every line but the head's)."""
        if not present(self.layout.lines):  # no lines.toml, no line of its own
            return []
        return [
            line
            for line in self.lines.lines
            if not is_head(self.layout, line) and line.series_path(self.layout.root).is_file()
        ]

    def series(self, line: Line) -> Series:
        """A line's series, read once; the head's is patches/series, read with the queue."""
        if is_head(self.layout, line):
            return self.queue.series
        with self._guard:
            found = self._series.get(line.name)
            if found is None:
                found = self._series[line.name] = line_series(self.layout, line)
            return found

    def series_text(self, line: Line) -> str:
        """The text of a line's series file, as the wheel ships it."""
        return self.series(line).dumps()

    def entries(self, line: Line) -> list[tuple[Entry, Patch | None]]:
        """Each entry of a line's series with the patch it names (None for a `skip`), read once per line."""
        with self._guard:
            found = self._entries.get(line.name)
            if found is None:
                found = [(e, self.entry_patch(line, e)) for e in self.series(line).entries]
                self._entries[line.name] = found
            return found

    def tag_patches(self, line: Line, tag: str | None) -> list[Patch]:
        """The patches `tag` of `line` replays, in series order (release.queue.load.tag_patches)."""
        return for_tag(self.entries(line), tag)

    def _text(self, path: Path) -> str:
        return _text(self._texts, path)


def _text(texts: dict[Path, str], path: Path) -> str:
    found = texts.get(path)
    if found is None:
        found = texts[path] = read_text(path, error=MalformedPatchError)
    return found


def _patch(texts: dict[Path, str], path: Path, prefixes: tuple[str, ...]) -> Patch:
    patch = Patch(path.name, _text(texts, path))
    patch.validate(prefixes)
    return patch
