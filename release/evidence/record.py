"""One evidence record as an index keeps it (INDEX_DIR/evidence/<wheel>.json): read bounded, checked, typed.

The evidence stage writes these (gather.Evidence.text); `publish` reads back the ones beside the wheels
an index holds, to refuse a new patch level that proves less (gather.refuse_backwards). An index is
input like any other: a file there may be a FIFO, 300,000 levels of `[`, `{"vllm": [1]}`, a `wheel`
that is a string, or the evidence of another wheel left beside a held one. `read_record` gives a typed
record or a named problem, never a traceback: at most EVIDENCE_LIMIT bytes of a regular file, at most
MAX_DEPTH levels of nesting (what publish writes has 4), each field of the type publish writes, no
control character in a name. `held_records` keeps the records of the wheels the index holds, each
bound to its wheel by name and sha256; the others are problems, which publish notes and repairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import BadInputError
from release.core.files import read_regular
from release.core.parse import parse_json
from release.core.text import control_character, described

EVIDENCE = "evidence"  # INDEX_DIR/evidence/
EVIDENCE_LIMIT = 1 << 20  # what publish writes is a few kB; the doctor reads these with the same bound
MAX_DEPTH = 8
SHA256_HEX = 64


@dataclass(frozen=True)
class HeldBug:
    bug: str
    verdict: str
    recorded: bool = False  # a record (train.toml, the scan data, ...) said the release has it


@dataclass(frozen=True)
class EvidenceRecord:
    """What the index says one wheel proved: its file name and sha256, its vLLM release, each bug's verdict."""

    path: Path
    wheel: str
    sha256: str
    vllm_version: str
    bugs: tuple[HeldBug, ...]

    def with_verdict(self, verdict: str) -> set[str]:
        return {b.bug for b in self.bugs if b.verdict == verdict}


class RecordError(BadInputError):
    """Not the evidence publish writes (the message says why); publish treats it as no evidence."""


def _depth(value: object, limit: int) -> int:
    """How deep `value` nests, counted no further than `limit` + 1 (iterative: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level > limit:
                return level
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise RecordError(f"its {what} is no string")
    bad = control_character(value)
    if bad:
        raise RecordError(f"its {what} holds the control character {described(bad)}")
    return value


def read_record(path: Path) -> EvidenceRecord:
    """The record at `path`, or RecordError naming why it is none."""
    data = parse_json(
        read_regular(path, EVIDENCE_LIMIT, follow_links=False, error=RecordError), where=str(path), error=RecordError
    )
    if _depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise RecordError(f"{path} nests deeper than the {MAX_DEPTH} levels evidence has")
    if not isinstance(data, dict):
        raise RecordError(f"{path} is no JSON object")
    wheel, vllm, bugs = data.get("wheel"), data.get("vllm"), data.get("bugs")
    if not isinstance(wheel, dict) or not isinstance(vllm, dict) or not isinstance(bugs, list):
        raise RecordError(f"{path} has no `wheel` and `vllm` objects and `bugs` list")
    sha256 = _name(wheel.get("sha256"), "wheel's sha256")
    if len(sha256) != SHA256_HEX or any(c not in "0123456789abcdef" for c in sha256):
        raise RecordError(f"{path}: its wheel's sha256 is no sha256")
    held = []
    for bug in bugs:
        if not isinstance(bug, dict):
            raise RecordError(f"{path}: a bug of it is no object")
        held.append(
            HeldBug(_name(bug.get("bug"), "bug"), _name(bug.get("verdict"), "verdict"), bug.get("recorded") is True)
        )
    name = _name(wheel.get("name"), "wheel's name")
    return EvidenceRecord(path, name, sha256, _name(vllm.get("version"), "vLLM version"), tuple(held))


def bound_record(path: Path, name: str, sha256: str) -> EvidenceRecord:
    """The record at `path` if it is the evidence of the wheel `name` with `sha256` (the caller's one read of that
    wheel, or what an index server lists for it), else RecordError."""
    record = read_record(path)
    if record.wheel != name:
        raise RecordError(f"{path} is the evidence of {record.wheel!r}, not of {name}")
    if record.sha256 != sha256:
        raise RecordError(f"{path} is the evidence of another build of {name} (sha256 {record.sha256[:12]}...)")
    return record


def held_records(index: Path, held: Callable[[str], str | None]) -> tuple[list[EvidenceRecord], list[str]]:
    """(the records bound to the wheels the index holds, a problem for each other evidence file of `index`).

    `held(name)`: the sha256 of the wheel the index holds under that file name, None where it holds none (a
    directory index: its simple/ page's file, read once by the command; an index server: its listing)."""
    records, problems = [], []
    folder = index / EVIDENCE
    for path in sorted(folder.glob("*.whl.json")) if folder.is_dir() else []:
        name = path.name.removesuffix(".json")
        try:
            sha256 = held(name)
            if sha256 is None:
                raise RecordError(f"{path} is beside no wheel the index holds")
            records.append(bound_record(path, name, sha256))
        except (RecordError, OSError) as exc:
            problems.append(str(exc))
    return records, problems


def has_record(index: Path, name: str, sha256: str) -> bool:
    """Does the index hold the evidence of the wheel `name` with `sha256`, bound to it?"""
    try:
        bound_record(index / EVIDENCE / f"{name}.json", name, sha256)
    except (RecordError, OSError):
        return False
    return True
