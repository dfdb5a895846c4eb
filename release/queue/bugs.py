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
from pathlib import Path
from typing import Any, Protocol

from release.core.errors import MissingFixError
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.model.patch import Patch
from release.model.scan import read_scan

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


def patch_folders(layout: Layout) -> list[Path]:
    """Where the queue's patch files are: patches/, patches/retired/ and every line's folder of variants."""
    folders = [layout.patches, layout.retired, *sorted((layout.patches / "lines").glob("*"))]
    return [folder for folder in folders if folder.is_dir()]


class Records(Protocol):
    """What the bug gates read from the checkout as the command read it once (release.queue.snapshot.Checkout,
    which imports this module): the scan data, the known bugs, and the bugs the train records per tag."""

    @property
    def scan(self) -> dict[str, Any] | None: ...

    def known_bugs(self) -> dict[str, str]: ...

    def recorded_bugs(self, tag: str) -> list[str]: ...


def required_bugs(records: Records, tag: str, recorded: list[str] | None = None) -> list[tuple[Bug, str]]:
    """Each bug `tag` has, with where that is known from: the train's record of the tag (`recorded`: the
    train's entry of `tag` when None; those a patch of the queue still names) and the scan data."""
    known = records.known_bugs()
    found: dict[str, tuple[Bug, list[str]]] = {}
    for ident in recorded if recorded is not None else records.recorded_bugs(tag):
        if ident in known:
            found[ident] = (Bug(ident, known[ident]), ["patches/train.toml"])
    for bug in affected_by(records.scan, version_of_tag(tag)):
        found.setdefault(bug.id, (Bug(bug.id, bug.title or known.get(bug.id, "")), []))[1].append("the scan data")
    return [(bug, ", ".join(sources)) for bug, sources in found.values()]


def missing_fixes(
    records: Records, tag: str, patches: Iterable[Patch], recorded: list[str] | None = None
) -> list[tuple[Bug, str]]:
    """The bugs `tag` has (required_bugs) that none of `patches` fixes, each with where that is known from."""
    have = carried(patches)
    return [(bug, source) for bug, source in required_bugs(records, tag, recorded) if bug.id not in have]


def refuse_missing_fixes(
    what: str, tag: str, missing: list[tuple[Bug, str]], carrying: list[str], line: str = ""
) -> None:
    if not missing:
        return
    bugs = [(bug.id, bug.title, source) for bug, source in missing]
    raise MissingFixError(what=what, tag=tag, bugs=bugs, carrying=carrying, line=line)
