"""`publish` refuses a wheel of ours that lacks the fix for a bug its vLLM release has.

A wheel's `_build_info.json` lists the patches it carries, each with the bug it fixes (`bug`, or
the `Bug:` trailer of a build that predates it); the checkout's scan data says which bugs each
vLLM release is affected by. A wheel for an affected release that carries no patch for one of
them would be installed as the newest patch level and reported as the fix: it is refused, and
nothing is published.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from release.core.layout import Layout
from release.queue.bugs import affected_by, refuse_missing_fixes, scan_data

BUILD_INFO = "vllm_fused_moe/_build_info.json"


def build_info(path: Path) -> dict[str, Any] | None:
    """The wheel's build facts, or None for a wheel without them (not an overlay, or unreadable: nothing to judge)."""
    try:
        with zipfile.ZipFile(path) as archive:
            if BUILD_INFO not in archive.namelist():
                return None
            info = json.loads(archive.read(BUILD_INFO))
    except (zipfile.BadZipFile, OSError, ValueError, KeyError):
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
        missing = [bug for bug in affected_by(data, info["vllm_version"]) if bug.id not in have]
        names = [str(p.get("name")) for p in info.get("patches") or [] if isinstance(p, dict)]
        refuse_missing_fixes(f"not publishing {path.name}", f"v{info['vllm_version']}", missing, names)
