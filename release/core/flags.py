"""The options several commands share, each defined once: `--from`, `--json`, `--report`, `--allow-dirty`.

A command adds one by calling its function here; what differs between commands (the help text,
a default, a metavar) is a parameter, so the flag's name, its destination and its type are the same
everywhere (`args.source`, `args.json`, `args.report`, `args.allow_dirty`). The runtime's own
command line (release/overlay/runtime/) ships without `release/` and keeps its `--json`.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

# Each flag's spelling, for a command that passes it on (doctor hands --json to the runtime's doctor).
FROM, JSON, REPORT, ALLOW_DIRTY = "--from", "--json", "--report", "--allow-dirty"

# An ArgumentParser, or a group of one (scan's `--markdown | --json`).
Options = argparse._ActionsContainer


def add_from(options: Options, *, help: str, default: str | None, choices: Sequence[str] | None = None) -> None:
    """`--from SOURCE` (model/source.py parses it), as `args.source`; with `choices`, argparse lists them."""
    options.add_argument(
        FROM,
        dest="source",
        default=default,
        choices=choices,
        metavar=None if choices else "SOURCE",
        help=help,
    )


def add_json(options: Options, *, help: str) -> None:
    """`--json`: the command's result as JSON on stdout, as `args.json`."""
    options.add_argument(JSON, action="store_true", help=help)


def add_report(options: Options, *, help: str, metavar: str | None = None) -> None:
    """`--report PATH`: where the command writes its report (None: its default place), as `args.report`."""
    options.add_argument(REPORT, type=path, default=None, metavar=metavar, help=help)


def add_allow_dirty(options: Options, *, help: str) -> None:
    """`--allow-dirty`: go on with a tree that is not pristine + series, as `args.allow_dirty`."""
    options.add_argument(ALLOW_DIRTY, action="store_true", help=help)


def path(text: str) -> Path:
    """A path argument (argparse `type=`): refused, as a usage error (exit 2) before any work, where it is empty
    or a link to nothing.

    An empty path is the working directory to Path (`Path('') == Path('.')`): `publish WHEEL ''` wrote an
    index into the checkout. A link to nothing is created through (mkdir follows it): `publish` made an index
    where a dangling INDEX_DIR pointed. Who means either says so: `.`, or the link's target."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path is no path (for the working directory, say `.`)")
    if "\0" in text:
        raise argparse.ArgumentTypeError("a path holds no NUL character")
    given = Path(text)
    if given.is_symlink() and not given.exists():
        raise argparse.ArgumentTypeError(f"{text!r} is a link to nothing ({str(given.readlink())!r}): name its target")
    return given


def name(text: str) -> str:
    """A name argument (a line, a tag; argparse `type=`): refused where it is empty, as a usage error (exit 2).

    `evidence --line ''` proved nothing and exited 0: an empty name is no name, never "all" or "none"."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty name is no name")
    return text


def absolute(path: Path) -> Path:
    """A path argument resolved once, at the command line, against the caller's working directory: the
    stages run processes in temporary directories (pip, pytest), where a relative path means another file."""
    return path.absolute()


def interpreter(given: str) -> str:
    """`--python`'s value as an absolute path: a path (it holds a "/") against the working directory, a bare
    name (`python3`) as the shell finds it on PATH; left as given where neither finds it (the run then says so)."""
    if os.sep in given or (os.altsep and os.altsep in given):
        return str(Path(given).absolute())
    return shutil.which(given) or given
