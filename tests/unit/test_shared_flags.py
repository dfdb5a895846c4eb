"""The options several commands share are defined once, in release/core/flags.py (issue 39)."""

from __future__ import annotations

import argparse

from helpers import REPO
from release.cli import build_parser
from release.core import flags

SHARED = {flags.FROM: "source", flags.JSON: "json", flags.REPORT: "report", flags.ALLOW_DIRTY: "allow_dirty"}


def parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """A parser and every command's and sub-action's below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += parsers(child)
    return found


def test_no_module_of_the_tooling_spells_a_shared_flag_but_core_flags() -> None:
    runtime = REPO / "release" / "overlay" / "runtime"  # the wheel's own command line, shipped without release/
    spelled = [
        f"{path.relative_to(REPO)}: {flag}"
        for path in sorted((REPO / "release").rglob("*.py"))
        if not path.is_relative_to(runtime) and path != REPO / "release" / "core" / "flags.py"
        for flag in SHARED
        if f'"{flag}"' in path.read_text(encoding="utf-8")
    ]
    assert spelled == []


def test_every_command_gets_a_shared_flag_under_one_destination() -> None:
    seen = {}
    for parser in parsers(build_parser()):
        for action in parser._actions:
            for flag in set(action.option_strings) & SHARED.keys():
                seen[f"{parser.prog} {flag}"] = action.dest
                assert action.dest == SHARED[flag], (parser.prog, flag)
    # Each flag is shared: taken by several commands or actions, all through release/core/flags.py.
    assert all(sum(key.endswith(f" {flag}") for key in seen) >= 2 for flag in SHARED), seen
