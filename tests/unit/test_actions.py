"""A command's sub-actions are one table (release/core/actions.py): each row is configured and dispatched."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

import pytest

from release.core.actions import Action, add_actions, dispatch
from release.core.layout import Layout
from release.pq import cli as pq_cli
from release.train import cli as train_cli


@pytest.mark.parametrize("module", [pq_cli, train_cli], ids=["pq", "train"])
def test_help_lists_exactly_the_rows_of_the_table_in_their_order(module: ModuleType) -> None:
    parser = argparse.ArgumentParser()
    module.configure(parser)
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(subparsers.choices) == [row.name for row in module.ACTIONS]


def test_each_action_runs_its_own_row(tmp_path: Path) -> None:
    ran: list[str] = []

    def row(name: str) -> Action:
        def handler(args: argparse.Namespace, layout: Layout) -> int:
            ran.append(f"{name} {args.value}")
            return len(ran)

        def configure(parser: argparse.ArgumentParser) -> None:
            parser.add_argument("value")

        return Action(name, f"the {name} action", configure, handler)

    table = (row("first"), row("second"), row("last"))
    parser = argparse.ArgumentParser()
    add_actions(parser, table)
    layout = Layout(tmp_path)
    codes = [dispatch(table, parser.parse_args([name, "x"]), layout) for name in ("second", "first", "last")]
    assert (ran, codes) == (["second x", "first x", "last x"], [1, 2, 3])
