"""`publish` refuses a wheel of ours that lacks the fix for a bug its vLLM release has, or that carries a
stale variant.

A wheel's `_build_info.json` lists the patches it carries, each with the bug it fixes (`bug`, or
the `Bug:` trailer of a build that predates it) and its trailers; the checkout says which bugs each
vLLM release has (patches/train.toml's `bugs` of the tag, and the scan data: release.queue.bugs).
A wheel for a release that has a bug and carries no patch for it would be installed as the newest
patch level and reported as the fix: it is refused, and nothing is published. So is a wheel that
carries a line's variant `pq carry` made (`Carried-From:`) from another version of the common patch
than the checkout's patches/ holds (release.queue.gates): it ships the old change.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from release.core.errors import BadInputError, BadWheelError
from release.core.files import WHEEL_LIMIT, open_regular, present, read_member
from release.core.layout import BUILD_INFO_MEMBER as BUILD_INFO
from release.core.layout import Layout
from release.core.parse import parse_json
from release.model.patch import CARRIED_FROM, VARIES
from release.model.train import Train
from release.queue.bugs import Bug, refuse_missing_fixes, required_bugs, scan_data
from release.queue.gates import Variant, VariantState, common_now, fingerprint, refuse_stale


def build_info(path: Path) -> dict[str, Any] | None:
    """The wheel's build facts, or None for a wheel without them (not an overlay, or unreadable: nothing to judge)."""
    try:
        with open_regular(path, WHEEL_LIMIT, error=BadWheelError) as handle, zipfile.ZipFile(handle) as archive:
            if BUILD_INFO not in archive.namelist():
                return None
            info = parse_json(read_member(archive, BUILD_INFO), where=BUILD_INFO)
    except (BadInputError, zipfile.BadZipFile, OSError, ValueError, KeyError):
        return None  # publish's own reading of the wheel says what is wrong with it
    return info if isinstance(info, dict) else None


def carried_bugs(info: dict[str, Any]) -> set[str]:
    """The bug ids the wheel's patches fix."""
    found = set()
    for patch in info.get("patches") or []:
        if not isinstance(patch, dict):
            continue
        bug = patch.get("bug")
        if bug is None:  # a build before `bug` was recorded: the trailer says it
            bug = str((patch.get("trailers") or {}).get("Bug", "")).split(" ", 1)[0]
        if bug:
            found.add(str(bug))
    return found


def refuse_wheels_missing_fixes(layout: Layout, wheels: list[Path]) -> None:
    data = scan_data(layout)
    for path in wheels:
        info = build_info(path)
        if info is None or not isinstance(info.get("vllm_version"), str):
            continue
        have = carried_bugs(info)
        tag = f"v{info['vllm_version']}"
        missing: list[tuple[Bug, str]] = [
            (bug, source) for bug, source in required_bugs(layout, tag, data) if bug.id not in have
        ]
        names = [str(p.get("name")) for p in info.get("patches") or [] if isinstance(p, dict)]
        entry = Train.load(layout.train).get(tag) if present(layout.train) else None
        line = entry.line if entry is not None else ""
        refuse_missing_fixes(f"not publishing {path.name}", tag, missing, names, line)
        refuse_stale(f"not publishing {path.name}", stale_in(layout, info, line or "not in the train"))


def stale_in(layout: Layout, info: dict[str, Any], line: str) -> list[Variant]:
    """The variants the wheel carries that `pq carry` made from another version of their common patch than
    the checkout's patches/ holds (a common patch the checkout no longer has is not judged here)."""
    found = []
    for patch in info.get("patches") or []:
        if not isinstance(patch, dict) or not isinstance(patch.get("trailers"), dict):
            continue
        trailers = patch["trailers"]
        made_from = str(trailers.get(CARRIED_FROM, "")).strip()
        common = str(trailers.get(VARIES, "")).strip().split(" ", 1)[0]
        current = common_now(layout, common) if made_from and common.endswith(".patch") and "/" not in common else None
        if current is not None and made_from != fingerprint(current):
            where = f"{patch.get('name')} in the wheel"
            found.append(Variant(where, line, common, VariantState.STALE, made_from, fingerprint(current)))
    return found
