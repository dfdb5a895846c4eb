"""What a patch is on one tree, and what a release is for the bug: the one vocabulary of every stage.

rebase reports it, the train refuses on it, scan ships it (affected-releases.json, which the
doctor reads in the user's environment): the values are the strings those outputs hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class PatchStatus(StrEnum):
    """A patch on one tree, classified as the patches before it left that tree (release/queue/upstreamed.py)."""

    APPLIES = "applies"  # `git apply --check` takes it, or `git am --3way` merges it cleanly
    UPSTREAM = "upstream"  # it reverse-applies, or its change is present (the semantic check)
    CONFLICT = "conflict"  # neither: the code moved
    ABSENT = "absent"  # the files it changes are not in the tree (scan)
    NOT_REACHED = "not-reached"  # after a conflict: never tried (rebase)
    SKIPPED = "skipped"  # the release's line does without it (`skip NAME: why` in its series; scan)


class ReleaseStatus(StrEnum):
    """A release, for one bug our patches fix, or for all of them (scan, from the statuses of the bugs'
    patches; a downstream patch, with no bug behind it, never counts; doctor reads it)."""

    AFFECTED = "affected"  # a bug's patch applies, or would once a variant resolves its conflict
    FIXED = "fixed"  # none applies and upstream has their change
    NOT_AFFECTED = "not-affected"  # none of their code is there


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
    status: PatchStatus
    how: str = ""
    refreshed: bool = False
    conflicts: list[Conflict] = field(default_factory=list)
