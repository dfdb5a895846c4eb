"""Which bugs a release has, and which a set of patches fixes: what check, train add, build and publish
hold a tag to before they record or ship it.

A patch says what it is for (release.model.patch.Purpose): the user-visible bug it fixes (`Bug: <id or
URL> <title>`) or a downstream change (`Downstream:`). Which bugs a train tag has is a fact of the tag,
never of how much the last scan read: patches/train.toml records it per tag (`bugs`: the bugs of every
patch a replay of the tag applied, which only grows), and the scan data (affected-releases.json, written
by `python -m release scan`, which a scan of a range may leave without a release) adds what it found: a
release is affected by a bug where that bug's patch (or its line's variant) applies. A recorded bug that
no patch of the queue names any more (its patch dropped everywhere) is not asked for. A tag that has a
bug and whose overlay would carry no patch for it is refused: shipping it would tell a user the fix is there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from release.core.errors import MalformedPatchError, MissingFixError
from release.core.files import present, read_text
from release.core.layout import Layout
from release.core.versions import canonical_tag, version_of_tag
from release.model.patch import Patch
from release.model.scan import read_scan
from release.model.train import Train

AFFECTED = "affected"


@dataclass(frozen=True)
class Bug:
    id: str  # the id or URL of the `Bug:` trailer
    title: str


def scan_data(layout: Layout) -> dict[str, Any] | None:
    """The checkout's scan data, or None where there is none (a checkout without a scan yet)."""
    return read_scan(layout.affected_json)  # release/model/scan.py: the one reader


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


def known_bugs(layout: Layout) -> dict[str, str]:
    """{bug id: title} of every patch of the queue: patches/, patches/retired/ and every line's variants."""
    found: dict[str, str] = {}
    folders = [layout.patches, layout.retired, *sorted((layout.patches / "lines").glob("*"))]
    for folder in folders:
        for path in sorted(folder.glob("*.patch")) if folder.is_dir() else []:
            try:
                purpose = Patch(path.name, read_text(path, error=MalformedPatchError)).purpose
            except (OSError, UnicodeDecodeError):
                continue  # loading the queue says what is wrong with it
            if purpose.bug:
                found.setdefault(purpose.bug, purpose.title)
    return found


def recorded_bugs(layout: Layout, tag: str) -> list[str]:
    """The bugs patches/train.toml records for `tag` (none for a tag it does not hold)."""
    if not present(layout.train):
        return []
    entry = Train.load(layout.train).get(canonical_tag(tag))
    return list(entry.bugs) if entry is not None else []


def required_bugs(
    layout: Layout,
    tag: str,
    data: dict[str, Any] | None = None,
    known: dict[str, str] | None = None,
    recorded: list[str] | None = None,
) -> list[tuple[Bug, str]]:
    """Each bug `tag` has, with where that is known from: the train's record of the tag (`recorded`, read
    from patches/train.toml when None; those a patch of the queue still names: `known`) and the scan data."""
    known = known if known is not None else known_bugs(layout)
    found: dict[str, tuple[Bug, list[str]]] = {}
    for ident in recorded if recorded is not None else recorded_bugs(layout, tag):
        if ident in known:
            found[ident] = (Bug(ident, known[ident]), ["patches/train.toml"])
    for bug in affected_by(data if data is not None else scan_data(layout), version_of_tag(tag)):
        found.setdefault(bug.id, (Bug(bug.id, bug.title or known.get(bug.id, "")), []))[1].append("the scan data")
    return [(bug, ", ".join(sources)) for bug, sources in found.values()]


def missing_fixes(
    layout: Layout,
    tag: str,
    patches: Iterable[Patch],
    data: dict[str, Any] | None = None,
    known: dict[str, str] | None = None,
    recorded: list[str] | None = None,
) -> list[tuple[Bug, str]]:
    """The bugs `tag` has (required_bugs) that none of `patches` fixes, each with where that is known from."""
    have = carried(patches)
    return [(bug, source) for bug, source in required_bugs(layout, tag, data, known, recorded) if bug.id not in have]


def refuse_missing_fixes(
    what: str, tag: str, missing: list[tuple[Bug, str]], carrying: list[str], line: str = ""
) -> None:
    if not missing:
        return
    bugs = [(bug.id, bug.title, source) for bug, source in missing]
    raise MissingFixError(what=what, tag=tag, bugs=bugs, carrying=carrying, line=line)
