"""A command's sub-actions (`train add`, `pq export`) as one table, as release/cli.py's COMMANDS is for commands.

Each row names the action, its one-line help (and its own `--help` description, where it has one),
the function that adds its options, and the handler that runs it. The same table makes the
subparsers, in its order, and dispatches `args.action`: an action is one row, in one place.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from release.core.layout import Layout


@dataclass(frozen=True)
class Action:
    name: str
    help: str
    # Adds the action's arguments to its subparser.
    configure: Callable[[argparse.ArgumentParser], None]
    # Maps the parsed arguments to the stage's options and calls the stage: its exit code.
    run: Callable[[argparse.Namespace, Layout], int]
    # The action's own `--help` text above its options (None: argparse's default, none).
    description: str | None = None


def add_actions(parser: argparse.ArgumentParser, table: Sequence[Action]) -> None:
    """One subparser per row, in the table's order; the chosen one's name is `args.action`."""
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action in table:
        action.configure(actions.add_parser(action.name, help=action.help, description=action.description))


def dispatch(table: Sequence[Action], args: argparse.Namespace, layout: Layout) -> int:
    """Run the row `args.action` names (argparse has refused any other name)."""
    (chosen,) = (action for action in table if action.name == args.action)
    return chosen.run(args, layout)
