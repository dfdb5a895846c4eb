"""Scratch directories a run owns while it lives, and the removal of those a killed run left behind.

A run's directory (in the temporary directory, `vllm-fused-moe-evidence-*`) and a half-extracted tree
in the wheel cache (`.python-*`, `.dist-info-*`) each hold an exclusive lock on a file inside them
(`flock`) for as long as their process lives; the kernel drops the lock when the process dies, however
it dies. A later run removes every such directory whose lock it can take: its owner is gone
(docs/guarantees.md, "Leftovers"). A directory without the lock file is one whose owner was killed
between making it and locking it, a moment; it is removed once it is older than a minute.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

LOCK = ".owner.lock"
UNLOCKED_GRACE_S = 60


@contextlib.contextmanager
def owned(prefix: str, parent: Path | None = None) -> Iterator[Path]:
    """A new directory under `parent` (the temporary directory), locked while the block runs, then removed
    (where the block renamed it into place, nothing is left to remove). Abandoned ones of the same prefix go
    first."""
    base = parent if parent is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    remove_abandoned(base, prefix)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    fd = hold(path)
    try:
        yield path
    finally:
        os.close(fd)  # the lock goes with the descriptor
        shutil.rmtree(path, ignore_errors=True)


def hold(path: Path) -> int:
    """Lock `path` as owned by this process for as long as the returned descriptor is open (or the process lives)."""
    fd = os.open(path / LOCK, os.O_CREAT | os.O_WRONLY, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def remove_abandoned(base: Path, prefix: str) -> list[Path]:
    """Remove each `prefix*` directory under `base` whose owner is gone; the ones removed."""
    removed = []
    for path in base.glob(f"{prefix}*"):
        if path.is_dir() and not path.is_symlink() and _abandoned(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _abandoned(path: Path) -> bool:
    lock = path / LOCK
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        try:
            return time.time() - path.stat().st_mtime > UNLOCKED_GRACE_S
        except OSError:
            return False
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held: its run is alive
    finally:
        os.close(fd)
    return True
