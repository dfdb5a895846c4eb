"""Progress lines on stderr, rate-limited so a 1,319-question run prints a few dozen lines."""

from __future__ import annotations

import time
from typing import TextIO

from release.core import log


class ProgressPrinter:
    def __init__(self, label: str, stream: TextIO | None = None, min_interval_s: float = 5.0) -> None:
        self.label = label
        self.stream = stream
        self.min_interval_s = min_interval_s
        self._started = time.monotonic()
        self._last_print = float("-inf")

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last_print < self.min_interval_s:
            return
        self._last_print = now
        elapsed = now - self._started
        rate = done / elapsed if elapsed > 0 else 0.0
        remaining = (total - done) / rate if rate > 0 else float("nan")
        note(
            f"{self.label}: {done}/{total} ({100.0 * done / total:.0f}%), {rate:.1f} q/s, ~{remaining:.0f} s left",
            self.stream,
        )


def note(message: str, stream: TextIO | None = None) -> None:
    """A line of progress: through the tool's logger (stderr, hidden by -q), or into `stream` where one is given."""
    if stream is None:
        log.note(f"[gsm8k] {message}")
    else:
        stream.write(f"[gsm8k] {message}\n")
        stream.flush()
