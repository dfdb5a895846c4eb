"""A series file: the order of a queue, one entry a line, comments kept.

Two kinds of series share one grammar (so `series merge=union` in .gitattributes keeps two
branches that each add a line from conflicting: every entry is one line of its own):

patches/series, the common queue (the head line's):
    NNNN-slug.patch             a patch of patches/, applied in this order
    retired NNNN-slug.patch     a patch upstream took (patches/retired/, `Applied-Upstream: vX`),
                                kept in its place: every tag older than vX still replays it here

patches/lines/<line>/series, a release line's account of every common patch:
    NNNN-slug.patch             the line's own variant (patches/lines/<line>/, `Varies: COMMON`)
    take NNNN-slug.patch        a common patch, as it is (patches/, or patches/retired/)
    skip NNNN-slug.patch: WHY   a common patch the line does without, and why

`#` starts a comment (also after an entry); blank lines and comments survive every rewrite.
A series is written with LF line ends and holds no control character (a CR, an ESC): what the
tool writes it writes back byte for byte, so it refuses on reading what it would not write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from release.core.errors import MalformedSeriesError
from release.core.files import read_text
from release.core.text import control_character, described
from release.model.patch import is_patch_name

RETIRED_DIR = "retired"
HINT = (
    "a series names one patch a line: `NNNN-slug.patch`; patches/series also `retired NAME`; a line's series "
    "`NAME` (its variant), `take NAME` (a common patch as it is) or `skip NAME: why`; `#` starts a comment"
)
_ENTRY_RE = re.compile(r"^(?:(?P<kind>take|retired)\s+)?(?P<name>\S+)$")
_SKIP_RE = re.compile(r"^skip\s+(?P<name>\S+?):\s*(?P<reason>.*)$")
# Every C0 and C1 control but the tab; the newline only ends a line.


def control_problem(text: str) -> str | None:
    """Why `text` cannot be (a line of) a series: a CR (CRLF line ends) or another control character."""
    found = control_character(text, allow="\t\n")
    if found is None:
        return None
    if found == "\r":
        return "has CRLF line ends (a CR); a series is written with LF line ends"
    return f"holds the control character {described(found)}"


class EntryKind(StrEnum):
    PATCH = "patch"  # patches/series: a common patch; a line's series: the line's own variant
    TAKE = "take"  # a line's series: a common patch as it is
    SKIP = "skip"  # a line's series: a common patch the line does without (`reason` says why)
    RETIRED = "retired"  # patches/series: a patch upstream took, replayed on tags older than its release


@dataclass(frozen=True)
class Entry:
    kind: EntryKind
    name: str
    reason: str = ""  # SKIP only

    def text(self) -> str:
        """The entry as its line in a series file."""
        if self.kind == EntryKind.PATCH:
            return self.name
        if self.kind == EntryKind.SKIP:
            return f"skip {self.name}: {self.reason}"
        return f"{self.kind} {self.name}"


def parse_entry(line: str) -> Entry | None:
    """The entry a series line holds (None: a comment or a blank line); ValueError when it holds no entry."""
    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    skip = _SKIP_RE.match(text)
    if skip:
        if not skip.group("reason").strip():
            raise ValueError(f"`skip {skip.group('name')}:` gives no reason")
        return Entry(EntryKind.SKIP, skip.group("name"), skip.group("reason").strip())
    match = _ENTRY_RE.match(text)
    if match is None or text.startswith("skip "):
        raise ValueError(f"{text!r} is not an entry")
    return Entry(EntryKind(match.group("kind") or EntryKind.PATCH), match.group("name"))


@dataclass(frozen=True)
class Series:
    """A series file: its lines as they are (comments and blank lines survive a rewrite) and their entries."""

    lines: tuple[str, ...]

    @classmethod
    def load(cls, path: Path, common: Path | None = None) -> Series:
        """patches/series (`common` None), or a release line's series, whose `take`s come from `common`
        (patches/, and patches/retired/ for a common patch upstream has since taken)."""
        if path.parent.exists() and not path.parent.is_dir():
            raise MalformedSeriesError(f"{path.parent} is not a directory", hint="restore patches/ from git")
        text = read_text(path, error=MalformedSeriesError)  # as bytes decode: a CRLF stays a CRLF
        lines = text.split("\n")  # not splitlines(): it also splits at U+2028, which a rewrite would turn into LF
        if lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            problem = control_problem(line)
            if problem:
                raise MalformedSeriesError(f"{path}:{number} {problem}", hint=HINT)
        series = cls(tuple(lines))
        series.validate(path, common)
        return series

    def validate(self, path: Path, common: Path | None) -> None:
        seen: set[str] = set()
        allowed = (EntryKind.PATCH, EntryKind.RETIRED) if common is None else (
            EntryKind.PATCH, EntryKind.TAKE, EntryKind.SKIP,
        )  # fmt: skip
        for number, line in enumerate(self.lines, 1):
            try:
                entry = parse_entry(line)
            except ValueError as exc:
                raise MalformedSeriesError(f"{path}:{number}: {exc}", hint=HINT) from None
            if entry is None:
                continue
            name = entry.name
            if not is_patch_name(name):
                raise MalformedSeriesError(f"{path}: {name!r} is not a patch file name in patches/", hint=HINT)
            if entry.kind not in allowed:
                where = "patches/series" if common is None else "a release line's series"
                raise MalformedSeriesError(f"{path}:{number}: `{entry.kind}` is no entry of {where}", hint=HINT)
            if name in seen:
                raise MalformedSeriesError(f"{path}: {name!r} is listed twice")
            seen.add(name)
            if entry.kind == EntryKind.SKIP:
                continue  # a line may do without a patch that is gone since: nothing to find
            if entry.kind == EntryKind.RETIRED and not (path.parent / RETIRED_DIR / name).is_file():
                folder = path.parent / RETIRED_DIR
                raise MalformedSeriesError(f"{path} names retired {name!r}, which is not in {folder}")
            if entry.kind == EntryKind.TAKE:
                assert common is not None
                if not ((common / name).is_file() or (common / RETIRED_DIR / name).is_file()):
                    raise MalformedSeriesError(f"{path} takes {name!r}, which is not in {common} nor its retired/")
            if entry.kind == EntryKind.PATCH and not (path.parent / name).is_file():
                if common is not None and (common / name).is_file():
                    raise MalformedSeriesError(
                        f"{path}:{number}: {name!r} is a common patch, not a variant of this line",
                        hint=f"write `take {name}` to take it as it is, or put the line's variant in {path.parent}",
                    )
                where = f"{path.parent}" + (f" nor {common}" if common is not None else "")
                raise MalformedSeriesError(f"{path} names {name!r}, which is not in {where}")

    @property
    def entries(self) -> list[Entry]:
        return [entry for entry in (_entry(line) for line in self.lines) if entry is not None]

    @property
    def names(self) -> list[str]:
        """The patches the series applies whatever the tag: patches/series' own, a line's variants and takes."""
        return [e.name for e in self.entries if e.kind in (EntryKind.PATCH, EntryKind.TAKE)]

    @property
    def retired(self) -> list[str]:
        return [e.name for e in self.entries if e.kind == EntryKind.RETIRED]

    def entry(self, name: str) -> Entry | None:
        return next((e for e in self.entries if e.name == name), None)

    def without(self, name: str) -> Series:
        return Series(tuple(line for line in self.lines if _name(line) != name))

    def replace(self, name: str, entry: Entry) -> Series:
        """The entry of `name` rewritten as `entry`, a comment after it kept."""
        out = []
        for line in self.lines:
            if _name(line) == name:
                comment = line.split("#", 1)[1] if "#" in line else None
                line = entry.text() + (f"  #{comment}" if comment is not None else "")
            out.append(line)
        return Series(tuple(out))

    def retire(self, name: str) -> Series:
        """`name` upstream: kept in its place as `retired NAME`, so older tags replay it where it was."""
        return self.replace(name, Entry(EntryKind.RETIRED, name))

    def unretire(self, name: str) -> Series:
        return self.replace(name, Entry(EntryKind.PATCH, name))

    def insert(self, entry: Entry, before: str | None = None) -> Series:
        """`entry` on a line of its own before the entry of `before` (at the end when None or absent)."""
        lines = list(self.lines)
        at = next((i for i, line in enumerate(lines) if before is not None and _name(line) == before), None)
        if at is None:
            lines.append(entry.text())
        else:
            lines.insert(at, entry.text())
        return Series(tuple(lines))

    def dumps(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""


def _entry(line: str) -> Entry | None:
    try:
        return parse_entry(line)
    except ValueError:
        return None  # load() refused it already; a Series made in memory holds only what we wrote


def _name(line: str) -> str | None:
    entry = _entry(line)
    return entry.name if entry else None
