"""What `publish` and `evidence` say while they prove: a line per run and per wheel with its time, and never a
silence longer than HEARTBEAT_S on a terminal.

A run (pytest importing torch and vLLM) takes 10-40 s on a loaded 2-core machine, longer than a person
waits without a word: while a proof is under way, a heartbeat thread says what is still running and for
how long whenever nothing was said for HEARTBEAT_S (on a terminal only: a log file gets the lines of
each run and wheel, not a tick every few seconds). Lines go to stderr, as notes (`-q` leaves them out).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from release.core import log

HEARTBEAT_S = 8.0  # below the 10 s of silence a terminal may see (issue 44)
T = TypeVar("T")

_lock = threading.Lock()
_running: dict[int, tuple[str, float]] = {}  # what each thread is doing, since when
_last_said = [time.monotonic()]


def say(message: str) -> None:
    with _lock:
        _last_said[0] = time.monotonic()
    log.note(message)


def timed(label: str, work: Callable[[], T], outcome: Callable[[T], str]) -> T:
    """`work()`, said as `label: <outcome> (N s)` when done, and named by the heartbeat while it runs."""
    me = threading.get_ident()
    started = time.monotonic()
    with _lock:
        _running[me] = (label, started)
    try:
        result = work()
    finally:
        with _lock:
            _running.pop(me, None)
    say(f"{label}: {outcome(result)} ({time.monotonic() - started:.1f} s)")
    return result


@contextmanager
def heartbeat(what: str) -> Iterator[None]:
    """While the block runs: on a terminal, a line whenever nothing was said for HEARTBEAT_S."""
    stop = threading.Event()
    if sys.stderr.isatty() and not log.quiet():
        threading.Thread(target=_beat, args=(what, stop), daemon=True).start()
    try:
        yield
    finally:
        stop.set()


def _beat(what: str, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        now = time.monotonic()
        with _lock:
            quiet_for = now - _last_said[0]
            running = sorted(_running.values(), key=lambda item: item[1])
        if quiet_for >= HEARTBEAT_S:
            doing = "; ".join(f"{label.removeprefix(what + ': ')} ({now - since:.0f} s)" for label, since in running)
            doing = doing or "preparing"
            say(f"{what}: still working: {doing}")
