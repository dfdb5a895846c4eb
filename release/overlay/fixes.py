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

from typing import Any

from release.model.patch import CARRIED_FROM, VARIES
from release.model.wheel import OverlayWheel
from release.queue.bugs import Bug, refuse_missing_fixes, required_bugs
from release.queue.gates import Variant, VariantState, fingerprint, refuse_stale
from release.queue.snapshot import Checkout


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


def refuse_wheels_missing_fixes(checkout: Checkout, wheels: list[OverlayWheel]) -> None:
    for wheel in wheels:
        info, tag = wheel.build_info, wheel.tag
        if info is None or tag is None:
            continue
        have = carried_bugs(info)
        missing: list[tuple[Bug, str]] = [
            (bug, source) for bug, source in required_bugs(checkout, tag) if bug.id not in have
        ]
        names = [str(p.get("name")) for p in info.get("patches") or [] if isinstance(p, dict)]
        entry = checkout.train_entry(tag)
        line = entry.line if entry is not None else ""
        refuse_missing_fixes(f"not publishing {wheel.name}", tag, missing, names, line)
        refuse_stale(f"not publishing {wheel.name}", stale_in(checkout, info, line or "not in the train"))


def stale_in(checkout: Checkout, info: dict[str, Any], line: str) -> list[Variant]:
    """The variants the wheel carries that `pq carry` made from another version of their common patch than
    the checkout's patches/ holds (a common patch the checkout no longer has is not judged here)."""
    found = []
    for patch in info.get("patches") or []:
        if not isinstance(patch, dict) or not isinstance(patch.get("trailers"), dict):
            continue
        trailers = patch["trailers"]
        made_from = str(trailers.get(CARRIED_FROM, "")).strip()
        common = str(trailers.get(VARIES, "")).strip().split(" ", 1)[0]
        current = checkout.common(common) if made_from and common.endswith(".patch") and "/" not in common else None
        if current is not None and made_from != fingerprint(current):
            where = f"{patch.get('name')} in the wheel"
            found.append(Variant(where, line, common, VariantState.STALE, made_from, fingerprint(current)))
    return found
