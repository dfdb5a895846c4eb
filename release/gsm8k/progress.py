"""Progress lines on stderr, rate-limited so a 1,319-question run prints a few dozen lines."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressPrinter:
    def __init__(self, label: str, stream: TextIO | None = None, min_interval_s: float = 5.0) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
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
        print(
            f"[gsm8k] {self.label}: {done}/{total} ({100.0 * done / total:.0f}%), "
            f"{rate:.1f} q/s, ~{remaining:.0f} s left",
            file=self.stream,
            flush=True,
        )


def note(message: str, stream: TextIO | None = None) -> None:
    print(f"[gsm8k] {message}", file=stream if stream is not None else sys.stderr, flush=True)
