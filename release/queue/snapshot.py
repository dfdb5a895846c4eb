"""One read of the checkout per command: the queue, the release lines, the train and the scan data.

A command loads a `Checkout` once, under its lock, and hands it to its stages, which read the facts
from it instead of from the files again (`build --all` reads patches/series, lines.toml and
train.toml once, tests/overlay/test_build_train.py counts it; `check`, tests/unit/
test_checkout_read_once.py). What not every stage needs is read the first time one asks for it and
kept: each line's series with the patch files it names (a line no stage asks about is not read, so a
broken line is reported by the stage that needs it, as before), the scan data, and vendor/'s drift
with the pristine tree recovered from it (the series undone once).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from release.core.files import present
from release.core.layout import Layout
from release.model.lines import Line, Lines, read_lines
from release.model.patch import Patch
from release.model.series import Entry, Series
from release.model.train import Train
from release.queue.bugs import scan_data
from release.queue.drift import Drift, drift
from release.queue.load import Queue, entry_patch, for_tag, is_head, line_series


@dataclass(frozen=True)
class Checkout:
    layout: Layout
    queue: Queue  # the pin, patches/series and its patches
    lines_toml: Lines | None  # patches/lines.toml (None: the checkout has none; `lines` says so)
    train: Train | None  # patches/train.toml (None: the checkout has none, or no lines.toml)
    _entries: dict[str, list[tuple[Entry, Patch | None]]] = field(default_factory=dict, compare=False, repr=False)
    _scan: list[dict[str, Any] | None] = field(default_factory=list, compare=False, repr=False)
    _drift: list[tuple[list[Drift], dict[str, bytes]]] = field(default_factory=list, compare=False, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @classmethod
    def load(cls, layout: Layout) -> Checkout:
        """Read the checkout, in the order the stages did: the queue, the lines, the train (the scan data when
        a stage first asks for it). A missing lines.toml or train.toml is refused by the stage that needs it."""
        queue = Queue.load(layout)
        lines = read_lines(layout.lines) if present(layout.lines) else None
        names = [line.name for line in lines.lines] if lines is not None else None
        train = Train.load(layout.train, names) if names is not None and present(layout.train) else None
        return cls(layout, queue, lines, train)

    @property
    def lines(self) -> Lines:
        """patches/lines.toml; a checkout without it is refused as reading it refuses it."""
        return self.lines_toml if self.lines_toml is not None else read_lines(self.layout.lines)

    def require_train(self) -> Train:
        """The train; a checkout without patches/train.toml is refused as Train.load refuses it."""
        return self.train if self.train is not None else Train.load(self.layout.train)

    @property
    def scan(self) -> dict[str, Any] | None:
        """The scan data (None: none, or not the scan's document), read once, when first asked for."""
        with self._guard:
            if not self._scan:
                self._scan.append(scan_data(self.layout))
            return self._scan[0]

    def drift(self) -> tuple[list[Drift], dict[str, bytes]]:
        """How vendor/ differs from pristine + series, and the pristine tree recovered from it
        (release.queue.drift.drift): vendor/ read and the series undone once, for every stage that asks."""
        with self._guard:
            if not self._drift:
                self._drift.append(drift(self.layout, self.queue))
            return self._drift[0]

    def line(self, name: str) -> Line:
        return self.lines.get(name)

    def series(self, line: Line) -> Series:
        """A line's series; the head's is patches/series, read once with the queue."""
        return self.queue.series if is_head(self.layout, line) else line_series(self.layout, line)

    def entries(self, line: Line) -> list[tuple[Entry, Patch | None]]:
        """Each entry of a line's series with the patch it names (None for a `skip`), read once per line."""
        with self._guard:
            found = self._entries.get(line.name)
            if found is None:
                found = [(entry, entry_patch(self.layout, line, entry)) for entry in self.series(line).entries]
                self._entries[line.name] = found
            return found

    def tag_patches(self, line: Line, tag: str | None) -> list[Patch]:
        """The patches `tag` of `line` replays, in series order (release.queue.load.tag_patches)."""
        return for_tag(self.entries(line), tag)
