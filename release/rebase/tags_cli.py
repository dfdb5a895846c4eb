"""`python -m release tags`: the command line of release/rebase/tags.py (which releases are newer than the pin)."""

from __future__ import annotations

import argparse

from release.core import flags, log
from release.core.errors import EXIT_OK
from release.core.files import read_text
from release.core.layout import Layout
from release.model.pin import Pin
from release.model.source import DEFAULT_GIT_URL
from release.rebase.tags import ls_remote, newer_than, parse_ls_remote


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "List vLLM final release tags newer than the pin in UPSTREAM.toml, oldest first, one a line. "
        "Pre-releases (rc, dev) are left out; a wheel build tag such as 0.21.0-1 counts as release 0.21.0. "
        "Prints nothing (exit 0) when the pin is the newest release."
    )
    parser.add_argument(
        "--remote", default=DEFAULT_GIT_URL, metavar="URL", help=f"the git remote to list (default: {DEFAULT_GIT_URL})"
    )
    parser.add_argument(
        "--ls-remote-output",
        type=flags.path,
        default=None,
        metavar="FILE",
        help="read recorded `git ls-remote --tags` output from FILE instead of asking the remote",
    )
    parser.add_argument("--pin", default=None, metavar="TAG", help="compare with TAG instead of UPSTREAM.toml's tag")
    parser.add_argument(
        "--newest", action="store_true", help="print only the newest release (what the watch rebases onto)"
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    pin_tag = args.pin or Pin.load(layout.upstream_toml).tag
    if args.ls_remote_output is not None:
        text = read_text(args.ls_remote_output, what="--ls-remote-output: ")
    else:
        text = ls_remote(args.remote)
    newer = newer_than(pin_tag, parse_ls_remote(text))
    log.note(f"pinned {pin_tag}; {len(newer)} newer release(s) on the remote")
    for version in newer[-1:] if args.newest else newer:
        log.out(version.tag)
    return EXIT_OK
