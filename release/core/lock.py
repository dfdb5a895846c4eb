"""One lock per repository (and one per index directory): two writers never interleave.

Every command that writes the checkout (rebase, pq, train add/remove, build, scan) holds
`repo_lock(layout, command)` for its whole run; `publish` holds `index_lock(index)`. The
lock is an OS file lock (filelock: fcntl on POSIX), so it is released when its holder
exits, even by SIGKILL: there is never a stale lock to delete by hand. A second command
waits up to VLLM_FUSED_MOE_LOCK_TIMEOUT seconds (default 60), saying whom it waits for,
then refuses with exit 2 (LockedError). The lock is re-entrant within one process.

Right after taking the repository lock, an interrupted swap is finished or cleaned up
(release.core.journal.recover), and the command says so: the holder of the lock is the only
process that may touch the tree, so nothing it finds can still be in progress.
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from filelock import FileLock, Timeout

from release.core import log
from release.core.errors import BadInputError, LockedError, OutputNotWritableError
from release.core.files import read_text
from release.core.journal import recover
from release.core.layout import Layout
from release.core.parse import parse_json

TIMEOUT_ENV = "VLLM_FUSED_MOE_LOCK_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
REPO_LOCK = "repo.lock"
INDEX_LOCK = ".publish.lock"

# Locks this process holds: path -> depth, so a command that calls another part holding it does not wait on itself.
_held: dict[Path, int] = {}


def lock_timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        return max(float(text), 0.0) if text.strip() else DEFAULT_TIMEOUT
    except ValueError:
        raise BadInputError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None


@contextmanager
def repo_lock(layout: Layout, command: str, shared: bool = False) -> Iterator[None]:
    """Hold the repository lock for `command`; finishes an interrupted swap first.

    `shared=True` is for readers (check, status): when another command holds the lock they
    read the tree as it is instead of waiting, and a checkout they cannot write is fine.
    """
    path = layout.work / REPO_LOCK
    try:
        layout.work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if shared and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            yield  # a read-only checkout: nobody can be writing it through us
            return
        raise OutputNotWritableError(f"cannot create {layout.work} for the repository lock: {exc}") from None
    with _locked(path, command, f"the repository {layout.root}", shared) as acquired:
        if acquired:
            for line in recover(layout):
                log.note(f"note: {line}")
        yield


@contextmanager
def index_lock(index: Path, command: str = "publish") -> Iterator[None]:
    """Hold the lock of a PEP 503 index directory (which must exist).

    Everything in INDEX_DIR is served over HTTP, so no holder file (a process id, a command) is
    written there: a publish that waits names "another command". The lock file itself is empty.
    """
    path = index / INDEX_LOCK
    with _locked(path, command, f"the index {index}", False, name_holder=False):
        with suppress(OSError):
            path.with_name(path.name + ".holder").unlink(missing_ok=True)  # one found there would be served
        yield


@contextmanager
def _locked(path: Path, command: str, what: str, shared: bool, name_holder: bool = True) -> Iterator[bool]:
    """Yields True once the lock is held; False for a reader that goes ahead without it."""
    key = path.resolve()
    if _held.get(key):
        _held[key] += 1
        try:
            yield True
        finally:
            _held[key] -= 1
        return
    lock = FileLock(str(path), is_singleton=False)
    holder_file = path.with_name(path.name + ".holder") if name_holder else None
    try:
        acquired = _acquire(lock, 0)
        if not acquired and shared:
            log.note(f"note: {_holder(holder_file)} holds {what}; reading it as it is now")
        elif not acquired:
            timeout = lock_timeout()
            holder = _holder(holder_file)
            log.note(f"waiting up to {timeout:.0f} s for {holder}, which holds {what} ...")
            if not _acquire(lock, timeout):
                holder = _holder(holder_file)
                raise LockedError(f"{holder} still holds {what} after {timeout:.0f} s; {command} did nothing")
            acquired = True
    except OSError as exc:
        if not shared:
            raise OutputNotWritableError(f"cannot take the lock of {what} ({path}): {exc}") from None
        acquired = False  # a reader of a tree it cannot write
    if not acquired:
        yield False
        return
    _held[key] = 1
    try:
        if holder_file is not None:
            _write_holder(holder_file, command)
        yield True
    finally:
        _held.pop(key, None)
        lock.release()


def _acquire(lock: FileLock, timeout: float) -> bool:
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        return False
    return True


def _write_holder(path: Path, command: str) -> None:
    # Only for the message a waiting command prints; the lock itself is the OS file lock.
    with suppress(OSError):
        path.write_text(json.dumps({"command": command, "pid": os.getpid(), "since": time.time()}), encoding="utf-8")


def _holder(path: Path | None) -> str:
    if path is None:
        return "another command"
    try:
        data = parse_json(read_text(path, 1 << 16), where=str(path))
        return f"`{data['command']}` (pid {data['pid']})"
    except (BadInputError, KeyError, TypeError):
        return "another command"
