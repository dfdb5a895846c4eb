"""Which bugs a release has, and which a set of patches fixes: what train add, build and publish hold
a tag to before they record or ship it.

A patch says what it is for (release.model.patch.Purpose): the user-visible bug it fixes (`Bug: <id or
URL> <title>`) or a downstream change (`Downstream:`). The scan data (affected-releases.json, written by
`python -m release scan`) says per release which bugs it is affected by: a release is affected by a bug
where that bug's patch (or its line's variant) applies. A tag that is affected by a bug and whose
overlay would carry no patch for it is refused: shipping it would tell a user the fix is there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.core.errors import MissingFixError
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.model.patch import Patch

AFFECTED = "affected"


@dataclass(frozen=True)
class Bug:
    id: str  # the id or URL of the `Bug:` trailer
    title: str


def scan_data(layout: Layout) -> dict[str, Any] | None:
    """The checkout's scan data, or None where there is none (a checkout without a scan yet)."""
    return read_scan(layout.affected_json)


def read_scan(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("releases"), dict) else None


def affected_by(data: dict[str, Any] | None, version: str) -> list[Bug]:
    """The bugs the scan data says `version` is affected by (none where it does not list the release)."""
    if data is None:
        return []
    entry = data["releases"].get(version)
    if not isinstance(entry, dict):
        return []
    titles = {str(k): str(v.get("title", "")) for k, v in (data.get("bugs") or {}).items() if isinstance(v, dict)}
    statuses = entry.get("bugs")
    if isinstance(statuses, dict):
        return [Bug(str(bug), titles.get(str(bug), "")) for bug, state in statuses.items() if state == AFFECTED]
    return []


def carried(patches: Iterable[Patch]) -> set[str]:
    """The bug ids these patches fix (each by its own `Bug:` trailer)."""
    return {p.purpose.bug for p in patches if p.purpose.bug}


def missing_fixes(layout: Layout, tag: str, patches: Iterable[Patch], data: dict[str, Any] | None = None) -> list[Bug]:
    """The bugs the scan data says `tag` is affected by that none of `patches` fixes."""
    have = carried(patches)
    found = affected_by(data if data is not None else scan_data(layout), version_of_tag(tag))
    return [bug for bug in found if bug.id not in have]


def refuse_missing_fixes(what: str, tag: str, missing: list[Bug], carrying: list[str]) -> None:
    if not missing:
        return
    bugs = "; ".join(f"{bug.id}" + (f" ({bug.title})" if bug.title else "") for bug in missing)
    has = ", ".join(carrying) or "no patch"
    raise MissingFixError(
        f"{what}: vLLM {tag} is affected by {bugs} (the scan data), but its replay would not fix it (it carries {has})"
    )
