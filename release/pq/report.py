"""What `pq export` and `pq drop` say of an export, and how a work tree's path is shown (as typed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from release.core import log
from release.core.errors import EXIT_OK
from release.pq.export import Export


def shown(path: Path) -> str:
    """A path as the maintainer typed it: relative to here when inside it."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else relative


def show_export(result: Export, path: Path, check_only: bool, as_json: bool) -> int:
    if as_json:
        log.out(json.dumps(result.as_json(), indent=2))
        return EXIT_OK
    width = max((len(p.name) for p in result.patches), default=0)
    for patch in result.patches:
        log.out(f"{patch.name:<{width}}  {patch.status:<9}  {patch.subject}")
    for name in result.dropped:
        log.out(f"{name:<{width}}  dropped")
    for note in result.notes:
        log.out(f"note: {note}")
    if not result.changed:
        log.out(f"patches/ and vendor/ are what {shown(path)} exports, byte for byte: nothing to write")
        return EXIT_OK
    if check_only:  # not reached: a difference is PatchQueueStaleError
        return EXIT_OK
    log.out(f"wrote in one swap: {', '.join(result.changed_paths)}")
    moved = [p.name for p in result.patches if p.status != "unchanged"]
    if moved:
        log.out(
            f"next: carry {', '.join(moved)} onto the release lines (`python -m release pq carry --all`), then "
            "`python -m release check` and re-record the train: `python -m release train add --all` and "
            "`python -m release train check` (every tag's patched files follow the series)"
        )
    elif any(not p.startswith("patches/") for p in result.changed_paths):
        log.out(
            "next: `python -m release check`, then re-record the train: `python -m release train add --all` "
            "and `python -m release train check` (every tag's patched files follow the series)"
        )
    return EXIT_OK
