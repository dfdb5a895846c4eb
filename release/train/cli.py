"""`python -m release train add|remove|list|check`: the vLLM releases we ship an overlay for.

patches/train.toml is the data; vendor/ is its head. `add` replays the series a tag takes
(its release line's; a retired patch where the tag is older than its Applied-Upstream) on the
tag's pristine modules in a scratch directory (the rules of `rebase`: no fuzz, 3-way) and
records where the code came from, the patches it carries, the bugs it has, its patch level and
the sha256 of every file before and after; it refuses, with exit 2, a tag where a patch conflicts,
one with nothing to carry, and one that has a bug (the train's record of it, the scan data) none
of its patches fixes. `check` proves every
tag still reproduces what is recorded. Both refuse a release line silent about a common patch.
"""

from __future__ import annotations

import argparse

from release.core import flags
from release.core.actions import Action, add_actions, dispatch
from release.core.errors import BadInputError
from release.core.layout import Layout
from release.model.source import Source
from release.train.add import DEFAULT_TRAIN_SOURCE, AddOptions, add_tags
from release.train.listing import ListOptions, list_train
from release.train.remove import RemoveOptions, remove_tags
from release.train.verify import CheckOptions, verify
from release.train.watch import WatchOptions, run_watch

EPILOG = """actions:
  add TAG...      replay the series each TAG takes on its pristine modules (scratch dir, no fuzz,
                  3-way; its line's series, a retired patch where TAG is older than its
                  Applied-Upstream) and record it with its release line (--line NAME, or the first
                  line of patches/lines.toml whose markers the release has) and the patches it
                  carries; an existing tag is re-recorded. Refused with exit 2, and nothing written,
                  when a patch conflicts, when nothing is left to carry (a patch already upstream
                  there is just not replayed), or when TAG has a bug none of its patches fixes
                  (patches/train.toml records each tag's bugs, the scan data adds its findings;
                  whatever the last scan read). It records the bugs the tag has (they only grow)
                  and its patch level with the digest of what it carries: the level before, one
                  above it when the carried patches changed (a tag's level only goes up).
  add --all       re-record every tag from its recorded source (after a change to patches/)
  remove TAG...   drop each TAG from the train (never the head: rebase away from it first), all or
                  nothing; each one's patch level is kept under [[removed]], so a later `add TAG`
                  continues from it, never back at 1
  list            the train as a table (--json for machines), with each tag's FlashInfer
                  range: its own pin intersected with vendor/vllm_fused_moe/VERIFIED.toml where a
                  patch it carries relies on FlashInfer (Depends-On), else nothing, and what
                  its overlay carries: a bug fix, or downstream changes only. A train without the
                  head's entry (or an empty one) is refused with exit 2
  check [TAG...]  every tag (or the named ones) reproduces its recorded pristine and patched
                  sha256, byte for byte; offline when the release wheels are cached
                  (~/.cache/vllm-fused-moe/wheels). Exit 1 names each tag and file that differ.
  watch SCAN_JSON for each release a scan (`python -m release scan --json`) lists after the
                  newest train tag: add it when every patch applies, report it as upstream when
                  the fix is in it, report a conflict or absence; --report FILE writes Markdown.

sources (--from): pypi (default), wheel:PATH, git+URL, git:PATH, dir:PATH; see `rebase --help`.
A wheel:PATH read by add is kept in the wheel cache by its sha256: check, add --all and build --all
find the recorded wheel:NAME there (or on the index, where it is the release file), from anywhere.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "The release train (patches/train.toml): every vLLM release we ship an overlay for, "
        "each rebuilt from its pristine source + patches/series and held to recorded hashes."
    )
    parser.epilog = EPILOG
    add_actions(parser, ACTIONS)


def run(args: argparse.Namespace, layout: Layout) -> int:
    return dispatch(ACTIONS, args, layout)


# ---------------------------------------------------------------- each action: its options, its stage


def _add_arguments(add: argparse.ArgumentParser) -> None:
    add.add_argument("tags", nargs="*", metavar="TAG", help="vLLM release tags, e.g. v0.20.2")
    flags.add_from(
        add,
        default=None,
        help=f"where to read each TAG's pristine code (default: {DEFAULT_TRAIN_SOURCE})",
    )
    add.add_argument(
        "--line",
        default=None,
        metavar="NAME",
        help="the release line (patches/lines.toml) of the TAGs (default: the first line whose markers each has)",
    )
    add.add_argument(
        "--all",
        action="store_true",
        help="re-record every tag of the train, each from its recorded source (after a change to patches/)",
    )


def _add(args: argparse.Namespace, layout: Layout) -> int:
    """TAG... (with --from and --line), or --all alone."""
    if args.all == bool(args.tags):
        raise BadInputError("`train add` takes TAG... or --all", hint="e.g. `python -m release train add v0.20.3`")
    if not args.all:
        return add_tags(
            layout, AddOptions(tuple(args.tags), Source.parse(args.source or DEFAULT_TRAIN_SOURCE), args.line)
        )
    if args.source or args.line:
        raise BadInputError(
            "--all re-reads every tag from its recorded source and line; it takes no --from/--line",
            hint="to read tags from another source or onto a line, name them: "
            "`python -m release train add TAG... --from SOURCE [--line LINE]`",
        )
    return add_tags(layout, AddOptions())


def _remove_arguments(remove: argparse.ArgumentParser) -> None:
    remove.add_argument("tags", nargs="+", metavar="TAG")


def _remove(args: argparse.Namespace, layout: Layout) -> int:
    return remove_tags(layout, RemoveOptions(tuple(args.tags)))


def _list_arguments(listing: argparse.ArgumentParser) -> None:
    flags.add_json(listing, help="print JSON instead of a table")


def _list(args: argparse.Namespace, layout: Layout) -> int:
    return list_train(layout, ListOptions(json=args.json))


def _check_arguments(check: argparse.ArgumentParser) -> None:
    check.add_argument("tags", nargs="*", metavar="TAG", help="only these tags (default: all)")


def _check(args: argparse.Namespace, layout: Layout) -> int:
    return verify(layout, CheckOptions(tuple(args.tags)))


def _watch_arguments(watch: argparse.ArgumentParser) -> None:
    watch.add_argument(
        "scan", type=flags.path, metavar="SCAN_JSON", help="the output of `python -m release scan --json`"
    )
    flags.add_report(watch, metavar="FILE.md", help="write the Markdown report here, and FILE.json")
    flags.add_from(watch, default=DEFAULT_TRAIN_SOURCE, help="where to read new tags from")


def _watch(args: argparse.Namespace, layout: Layout) -> int:
    return run_watch(layout, WatchOptions(scan=args.scan, source=Source.parse(args.source), report=args.report))


# The actions, in the order `train --help` lists them: the one place an action is named.
ACTIONS = (
    Action("add", "add (or re-record) tags", _add_arguments, _add),
    Action("remove", "drop tags from the train", _remove_arguments, _remove),
    Action("list", "the train as a table", _list_arguments, _list),
    Action("check", "every tag reproduces its recorded hashes", _check_arguments, _check),
    Action("watch", "add the new affected releases a scan found (the watch workflow)", _watch_arguments, _watch),
)
