"""What replaying a patch on one tree came to: the outcome rebase reports, train records and scan ships."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Conflict:
    file: str
    hunks: list[str]
    ours: str  # the new upstream side
    theirs: str  # the patch's side


@dataclass
class PatchOutcome:
    name: str
    subject: str
    status: str  # applied | upstream | conflict | not-reached
    how: str = ""
    refreshed: bool = False
    conflicts: list[Conflict] = field(default_factory=list)
