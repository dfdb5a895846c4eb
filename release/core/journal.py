"""Replace several paths of a checkout as one change that survives a SIGKILL at any instant.

A change is a list of `Output`s (a directory with its complete new content, a file, or a
removal), written in three phases under `.work/swap/`:

1. stage: every new version is written and fsynced under `new/<i>`; nothing else moved.
2. journal: `journal.json` is written atomically (temporary file, fsync, rename). From
   here the change is decided: it can only be finished, never lost.
3. apply: for each output, the current version is renamed to `old/<i>` and the staged one
   to its place (two atomic renames); then the paths in `discard` are removed,
   `journal.json` is renamed to `done.json`, and `.work/swap/` is removed.

`recover()` runs whenever a command takes the repository lock (release.core.lock): a
journal is rolled forward (the renames are idempotent: which of `new/<i>`, `old/<i>` and
the target exist says how far each output got), a `done.json` or a swap directory without
a journal is removed, since the tree is then either all new or all old. It says what it did.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from release.core.errors import BadInputError, JournalError
from release.core.faults import fault_point
from release.core.files import read_text
from release.core.layout import Layout
from release.core.parse import parse_json

SWAP_DIR = "swap"
JOURNAL = "journal.json"
DONE = "done.json"


@dataclass(frozen=True)
class Output:
    """One path of the checkout and what it becomes.

    `files` set: a directory whose whole content becomes `files` ({relative posix path: bytes}).
    `data` set: a file whose content becomes `data`. Neither: the path is removed.
    """

    target: str  # relative to the checkout root, posix
    files: dict[str, bytes] | None = None
    data: bytes | None = None

    @property
    def kind(self) -> str:
        return "dir" if self.files is not None else "file" if self.data is not None else "remove"


def swap_dir(layout: Layout) -> Path:
    return layout.work / SWAP_DIR


def commit(layout: Layout, outputs: list[Output], what: str, discard: list[Path] | None = None) -> None:
    """Put every output in place as one change (see the module docstring); the caller holds the lock."""
    _check_targets(layout, outputs)
    swap = swap_dir(layout)
    if swap.exists():
        # recover() ran when the lock was taken, so this is a bug, not an operator's leftover.
        raise JournalError(f"{swap} exists while starting a new swap")
    new = swap / "new"
    new.mkdir(parents=True)
    for index, output in enumerate(outputs):
        staged = new / str(index)
        if output.files is not None:
            staged.mkdir()
            for name, data in sorted(output.files.items()):
                write_synced(staged / name, data)
        elif output.data is not None:
            write_synced(staged, output.data)
    sync_dir(new)
    fault_point("swap:staged")
    journal = {
        "what": what,
        "outputs": [{"target": o.target, "kind": o.kind} for o in outputs],
        "discard": [os.path.relpath(p, layout.root) for p in discard or []],
    }
    write_atomic(swap / JOURNAL, (json.dumps(journal, indent=2) + "\n").encode())
    fault_point("swap:journal")
    _roll_forward(layout, journal)


def recover(layout: Layout) -> list[str]:
    """Finish or clean up a swap a killed command left behind; returns what was done, for the user."""
    swap = swap_dir(layout)
    if not swap.exists():
        return []
    journal_file = swap / JOURNAL
    if journal_file.is_file():
        try:
            journal = parse_json(read_text(journal_file), where=str(journal_file), error=ValueError)
            what = str(journal["what"])
        except (BadInputError, ValueError, KeyError, TypeError) as exc:
            raise JournalError(f"{journal_file} is unreadable ({exc}); its swap cannot be finished") from None
        _roll_forward(layout, journal)
        return [
            f"finished an interrupted swap ({what}) from its journal: "
            + ", ".join(o["target"] for o in journal["outputs"])
            + " are all the new version now"
        ]
    if (swap / DONE).is_file():
        shutil.rmtree(swap)
        return ["removed the leftovers of a finished swap (.work/swap/); the tree is the new version"]
    shutil.rmtree(swap)
    return ["removed a half-staged swap (.work/swap/) of a killed command; it had changed nothing"]


def _roll_forward(layout: Layout, journal: dict) -> None:  # type: ignore[type-arg]
    swap = swap_dir(layout)
    for index, output in enumerate(journal["outputs"]):
        target = layout.root / output["target"]
        staged, old = swap / "new" / str(index), swap / "old" / str(index)
        if output["kind"] == "remove":
            if _exists(target) and not _exists(old):
                old.parent.mkdir(parents=True, exist_ok=True)
                target.replace(old)
                fault_point("swap:moved-old")
            continue
        if not _exists(staged):
            continue  # already in place
        if _exists(target):
            if _exists(old):  # cannot happen through commit(); never guess which one is which
                raise JournalError(f"{target}, its staged and its old version all exist; compare them by hand")
            old.parent.mkdir(parents=True, exist_ok=True)
            target.replace(old)
            fault_point("swap:moved-old")
        target.parent.mkdir(parents=True, exist_ok=True)
        staged.replace(target)
        sync_dir(target.parent)
        fault_point("swap:moved-new")
    for relative in journal.get("discard", []):
        path = layout.root / relative
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif _exists(path):
            path.unlink()
    fault_point("swap:discarded")
    (swap / JOURNAL).replace(swap / DONE)
    fault_point("swap:done")
    shutil.rmtree(swap)


def _check_targets(layout: Layout, outputs: list[Output]) -> None:
    seen: list[str] = []
    for output in outputs:
        parts = output.target.split("/")
        if output.target.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise JournalError(f"output {output.target!r} is not a plain path inside the checkout")
        for other in seen:
            if output.target == other or output.target.startswith(other + "/") or other.startswith(output.target + "/"):
                raise JournalError(f"outputs {other!r} and {output.target!r} overlap")
        seen.append(output.target)
        for name in output.files or {}:
            if name.startswith("/") or any(p in ("", ".", "..") for p in name.split("/")):
                raise JournalError(f"{output.target}: {name!r} is not a plain relative path")


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


# ------------------------------------------------------------- durable writes


def write_synced(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` by `data` so that a reader (or a crash) sees the old bytes or the new, never a part."""
    write_atomic_from(path, lambda handle: handle.write(data))


def copy_atomic(source: Path, target: Path) -> list[Path]:
    """Copy `source` to `target` as write_atomic writes: beside it, fsynced, renamed into place.

    A kill at any instant leaves under `target` the file that was there before (or none) or the
    whole copy, never a truncated one. Returns the partial copies of killed runs that it removed.
    """
    with source.open("rb") as reader:
        return write_atomic_from(target, lambda handle: shutil.copyfileobj(reader, handle, 1 << 22))


def temporary_name(path: Path, pid: int | None = None) -> Path:
    """Where `path` is written before it is renamed into place: a hidden name no glob for `*.whl`,
    `*.toml` or `*.json` matches, so a reader never takes a leftover for the real file."""
    return path.with_name(f".{path.name}.tmp-{os.getpid() if pid is None else pid}")


def write_atomic_from(path: Path, fill: Callable[[BinaryIO], object]) -> list[Path]:
    """Replace `path` by what `fill` writes into the handle it is given, as write_atomic does.

    The one atomic writer of the tooling: every output is written beside its target under a hidden
    name, fsynced, renamed into place and its directory synced. An exception from `fill` (a digest
    that does not match, say) leaves the old file and no temporary. Returns the leftovers of killed
    writers that it removed.
    """
    removed = remove_leftovers(path)
    temporary = temporary_name(path)
    try:
        with temporary.open("wb") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        fault_point("atomic:written")
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)
    sync_dir(path.parent)
    fault_point("atomic:renamed")
    return removed


def remove_leftovers(path: Path) -> list[Path]:
    """Remove the temporary files of `path` that killed writers left (their process is gone)."""
    removed = []
    prefix = temporary_name(path, 0).name.removesuffix("0")
    for candidate in path.parent.glob(glob.escape(prefix) + "*") if path.parent.is_dir() else []:
        pid = candidate.name.removeprefix(prefix)
        if pid.isdigit() and not _alive(int(pid)):
            candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed


def _alive(pid: int) -> bool:
    # A live writer (another checkout copying the same wheel into a shared --out) keeps its file.
    if pid == os.getpid():
        return False  # our own leftover: this process is not writing it now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def sync_dir(directory: Path) -> None:
    # A rename is durable once its directory is; where directories cannot be opened, skip it.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
