"""What an interrupted publish left in the index, finished (under the index lock), and what no publish of ours
leaves, refused: leftovers, pages that are stale or cut short, requirements files missing or stale, strays."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from release.core.errors import BadWheelError, IndexCorruptError
from release.core.hashing import file_sha256
from release.core.journal import write_atomic
from release.overlay.pages import (
    REQUIREMENTS,
    TMP_PREFIX,
    listed_files,
    project_page,
    read_page,
    requirements_files,
    root_page,
)
from release.overlay.wheel import WheelReads


def is_writable(directory: Path) -> bool:
    mode = directory.stat().st_mode
    return os.access(directory, os.W_OK) and bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def repair(simple: Path, reads: WheelReads) -> list[str]:
    """Finish what an interrupted publish left, or refuse what no publish of ours can leave.

    Runs under the index lock, so every `.publish-*` file is a dead publish's: removed. A wheel
    on disk that its page does not list (renamed in before the page was) and a page that is
    truncated or stale are repaired by regenerating the page from the files, each checked. A
    listed file that is gone or has other bytes, or a stray non-wheel, is refused: no crash of
    ours makes those. A read-only index is never repaired, only refused.
    """
    if not simple.is_dir():
        return []
    done: list[str] = []
    writable = is_writable(simple)
    projects = sorted(p for p in simple.iterdir() if p.is_dir() and not p.name.startswith("."))
    requirements = simple.parent / REQUIREMENTS
    # In requirements/ every hidden file is a dead write of ours: a publish's or write_atomic's temporary.
    leftovers = sorted(
        [p for d in [simple, *projects] for p in d.iterdir() if p.name.startswith(TMP_PREFIX)]
        + ([p for p in requirements.iterdir() if p.name.startswith(".")] if requirements.is_dir() else [])
    )
    if leftovers:
        if not writable or not all(is_writable(p.parent) for p in leftovers):
            shown = ", ".join(str(p) for p in leftovers)
            raise IndexCorruptError(f"leftovers of an interrupted publish in a read-only index: {shown}")
        for path in leftovers:
            path.unlink()
        done.append(f"removed {len(leftovers)} leftover(s) of an interrupted publish ({leftovers[0].name}, ...)")
    for project_dir in projects:
        page = project_dir / "index.html"
        listed = listed_files(page)
        on_disk = {p.name for p in project_dir.iterdir() if p.name != "index.html"}
        gone = sorted(set(listed) - on_disk)
        if gone:
            raise IndexCorruptError(f"{page} lists {', '.join(gone)}, which is gone from {project_dir}")
        for name, sha in sorted(listed.items()):
            if _sha256(project_dir / name, reads) != sha:
                raise IndexCorruptError(f"{project_dir / name} does not have the sha256 its index.html lists")
        wheels = []
        for name in sorted(on_disk):
            path = project_dir / name
            if not name.endswith(".whl") or not path.is_file():
                raise IndexCorruptError(f"{path} is not a wheel; no publish puts it there")
            try:
                wheel = reads(path)
            except BadWheelError as exc:
                raise IndexCorruptError(f"{path} is no wheel a publish puts there: {exc}") from None
            if wheel.project != project_dir.name:
                raise IndexCorruptError(f"{path} is a wheel of {wheel.project}, not of {project_dir.name}")
            wheels.append(wheel)
        expected = project_page(project_dir, project_dir.name, [], reads)
        if read_page(page) != expected:
            why = f"it did not list {', '.join(sorted(on_disk - set(listed)))}" if on_disk - set(listed) else "stale"
            _rewrite(page, expected, writable and is_writable(project_dir), why)
            done.append(f"repaired {page} ({why}, left by an interrupted publish)")
    if projects:
        expected = root_page(simple, set())
        if read_page(simple / "index.html") != expected:
            _rewrite(simple / "index.html", expected, writable, "it did not list every project")
            done.append(f"repaired {simple / 'index.html'} (it did not list every project)")
    return done + _repair_requirements(simple.parent, writable, reads)


def _repair_requirements(index: Path, writable: bool, reads: WheelReads) -> list[str]:
    """Write the requirements files that are missing or name another wheel than the newest; refuse strays."""
    directory = index / REQUIREMENTS
    expected = requirements_files(index, [], reads)
    if directory.is_dir():
        strays = sorted(p.name for p in directory.iterdir() if directory / p.name not in expected)
        if strays:
            raise IndexCorruptError(f"{directory / strays[0]} is no requirements file a publish writes there")
    done: list[str] = []
    for path, text in expected.items():
        current = read_page(path)
        if current == text:
            continue
        # Missing: an index published before publish wrote them, or a crash before their rename.
        why = "it was missing" if not path.exists() else "it did not name the newest wheel"
        can_write = writable and is_writable(index) and (not directory.exists() or is_writable(directory))
        if can_write:
            directory.mkdir(exist_ok=True)
        _rewrite(path, text, can_write, why)
        done.append(f"wrote {path.relative_to(index)} ({why})")
    return done


def _rewrite(page: Path, text: str, writable: bool, why: str) -> None:
    if not writable:
        raise IndexCorruptError(f"{page} is half-written or stale ({why}) and the index is read-only")
    write_atomic(page, text.encode("utf-8"))


def check_consistent(project_dir: Path, reads: WheelReads) -> None:
    """The project page lists exactly the wheels on disk, with their sha256; no leftovers."""
    if not project_dir.exists():
        return
    page = project_dir / "index.html"
    on_disk = {p.name for p in project_dir.iterdir() if p.name != "index.html"}
    leftovers = sorted(n for n in on_disk if n.startswith(TMP_PREFIX))
    if leftovers:
        raise IndexCorruptError(f"{project_dir} holds leftovers of an interrupted publish: {', '.join(leftovers)}")
    if not page.is_file():
        if on_disk:
            raise IndexCorruptError(f"{project_dir} has files but no index.html")
        return
    listed = listed_files(page)
    if set(listed) != on_disk:
        missing, unlisted = sorted(set(listed) - on_disk), sorted(on_disk - set(listed))
        raise IndexCorruptError(
            f"{page} does not match the directory (listed but missing: {missing or 'none'}; "
            f"present but unlisted: {unlisted or 'none'})"
        )
    for name, sha in sorted(listed.items()):
        if _sha256(project_dir / name, reads) != sha:
            raise IndexCorruptError(f"{project_dir / name} does not have the sha256 its index.html lists")


def _sha256(path: Path, reads: WheelReads) -> str:
    """A listed file's sha256: from the one read of a wheel; a file that is no readable wheel, hashed as it is
    (what it is, is refused below by its name and its contents)."""
    try:
        return reads(path).sha256
    except BadWheelError:
        return file_sha256(path)
