"""tests/expected-skips.toml: every skip a run may report, by test id pattern, each with why.

tests/conftest.py fails a run (at the session's end) on a skip no entry names, so a new skip is a decision
written down, never a line in a summary nobody reads.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from helpers import REPO

EXPECTED_SKIPS = REPO / "tests" / "expected-skips.toml"


def expected_skips(path: Path = EXPECTED_SKIPS) -> dict[str, str]:
    """{test id pattern (fnmatch, `[[]` for a bracket): why it may skip}."""
    entries = tomllib.loads(path.read_text(encoding="utf-8"))["skip"]
    return {str(entry["test"]): str(entry["why"]) for entry in entries}


def unnamed_skips(skipped: list[tuple[str, str]], patterns: list[str]) -> list[tuple[str, str]]:
    """The (test id, reason) of each skip in `skipped` that no pattern names. A test id as pytest-xdist's
    `--dist loadgroup` reports it carries its group after an `@` (`FILE::TEST[PARAM]@GROUP`): the pattern
    names the test, so the group is left out of the match."""
    return [
        (test, why)
        for test, why in skipped
        if not any(fnmatch.fnmatchcase(test.partition("@")[0], p) for p in patterns)
    ]
