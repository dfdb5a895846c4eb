"""`python -m release pq import|new|export`: edit the patch queue as git commits."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from release.core import flags
from release.core.actions import Action, add_actions, dispatch
from release.core.errors import BadInputError
from release.core.layout import Layout
from release.pq.carrying import CarryOptions, SkipOptions, carry_patches, skip_patch
from release.pq.drop import DropOptions, drop
from release.pq.exporting import ExportOptions, write_back
from release.pq.importing import ImportOptions, make_tree
from release.pq.names import SLUG_LENGTH
from release.pq.new import NewOptions, start_patch
from release.pq.tree import default_dir

EPILOG = """the loop (docs/patch-queue.md, "Add a patch"):
  python -m release pq import          .work/pq/: the pinned tag's pristine subtree (tag `pristine`),
                                       then one commit per patch of patches/series (branch patch-queue)
  python -m release pq new SLUG        .work/pq/.git/pq-template: the message of the next patch,
                                       NNNN-SLUG.patch (Why / How / Related PR / Future plan, trailers)
  git -C .work/pq commit -a -t .git/pq-template
                                       edit, add, reorder (`rebase -i pristine`), drop: plain git
  python -m release pq export          patches/ (the patches, series) and vendor/, in one swap
  python -m release pq export --check  exit 1 if patches/ or vendor/ differ from that export
  python -m release pq carry --all     carry every new or changed common patch onto every older release line
                                       (or `pq carry NAME`, one): writes each line's variant where it applies
                                       on every train tag of the line (3-way, never fuzz), names each line that
                                       needs one made by hand, and replays the head line's series on each of
                                       its train tags (exit 3 naming the tag where it conflicts)
  python -m release pq import --line LINE --dir DIR
                                       a line's own tree, for a variant by hand: its newest train tag, then its
                                       series with the common patches it lacks, by `git am --3way` (exit 3 at a
                                       conflict: resolve, `git add`, `git am --continue`); `pq export --dir DIR`
                                       writes the line's variants (Varies:, Carried-From:) and series
  python -m release pq skip NAME --line LINE --reason WHY
                                       a line does without the patch: `skip NAME: WHY` in its series
  python -m release pq drop NAME       a patch out of the queue: its commit taken out of the work tree, then
                                       exported (patches/, series, vendor/, and what carry and skip wrote)

A commit keeps its patch's file name by the `Patch-Name:` line import adds to its message (the
export strips it); without one it takes the name of the old patch with its subject, or the next
free number. Export refuses, changing nothing: a git command half-done, uncommitted or untracked
files, a merge or an empty commit, a message without Why / How / Related PR / Future plan and
Origin, Bug or Downstream, Depends-On, Risk, and dropping a patch a release line's series takes.
Every release line's series must then say something about each common patch (check refuses a
silent line): its variant, `take NAME`, or `skip NAME: why` (docs/patch-queue.md)."""


def wrapped(text: str) -> str:
    # An action's help keeps its line breaks (the exit codes are a table), so its prose is wrapped here.
    return textwrap.fill(text, width=100)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Edit the patch queue with plain git: import patches/series as commits on the pinned tag's pristine "
        "subtree, change them, export them back to patches/ and vendor/ byte for byte."
    )
    parser.epilog = EPILOG
    add_actions(parser, ACTIONS)


def run(args: argparse.Namespace, layout: Layout) -> int:
    return dispatch(ACTIONS, args, layout)


# ---------------------------------------------------------------- each action: its options, its stage

WHERE = "the work tree (default: .work/pq/ in the checkout)"


def _work_tree(args: argparse.Namespace, layout: Layout) -> Path:
    """--dir as given (made absolute), else .work/pq/ in the checkout."""
    return args.dir.absolute() if args.dir else default_dir(layout)


_IMPORT_DESCRIPTION = wrapped(
    "Make a git work tree with upstream paths: one commit holding the pinned tag's pristine "
    "subtree (recovered from vendor/ by undoing the series: no network; tagged `pristine`), then one "
    "commit per patch of patches/series, in order, with the mail's author, date and message and a "
    "`Patch-Name:` line. An older work tree is replaced only when everything in it was exported."
)


def _import_arguments(imp: argparse.ArgumentParser) -> None:
    imp.add_argument(
        "--dir", type=flags.path, default=None, help=WHERE + "; one that cannot be (created as) a directory is exit 2"
    )
    imp.add_argument("--force", action="store_true", help="replace a work tree even if it holds work not exported")
    imp.add_argument(
        "--line",
        metavar="LINE",
        default=None,
        help="an older release line's tree instead (a variant by hand): the newest train tag of LINE "
        "(patches/train.toml), its pristine modules held to the recorded sha256, then the line's series with each "
        "common patch it is silent about (or carried from another version of) mapped onto it, by `git am "
        "--3way`; a patch that does not merge is left as git leaves it (markers, `git status`, `git am "
        "--continue`), exit 3; `pq export` then writes the line's variants (Varies:, Carried-From:) and series",
    )
    imp.add_argument("--tag", metavar="TAG", default=None, help="as --line, on this train tag of an older line")


def _import(args: argparse.Namespace, layout: Layout) -> int:
    return make_tree(layout, ImportOptions(_work_tree(args, layout), args.force, args.line, args.tag))


_NEW_DESCRIPTION = wrapped(
    "Write .git/pq-template in the work tree: the message a new patch starts from, named "
    "NNNN-SLUG.patch with the next number no patch has used. Commit with `git -C DIR commit -t "
    ".git/pq-template` and answer every <...>."
)


def _new_arguments(new: argparse.ArgumentParser) -> None:
    new.add_argument(
        "slug",
        metavar="SLUG",
        help=f"the file name's words, e.g. shape-check: lowercase letters, digits and '-', at most {SLUG_LENGTH} "
        "characters (exit 2 otherwise)",
    )
    new.add_argument("--dir", type=flags.path, default=None, help=WHERE)


def _new(args: argparse.Namespace, layout: Layout) -> int:
    return start_patch(layout, NewOptions(_work_tree(args, layout), args.slug))


_EXPORT_DESCRIPTION = wrapped(
    "Export base..HEAD with `git format-patch --keep-subject --no-stat --no-signature "
    "--zero-commit --full-index`, name and validate each patch, rewrite patches/series (its comments "
    "kept) and rebuild vendor/ as pristine + the new series, in one journaled swap. An unchanged "
    "queue exports byte for byte, so nothing is written. From a line's tree (`pq import --line`): the "
    "commits of the common patches the import put in become the line's variants in patches/lines/<line>/ "
    "(Varies: and Carried-From: added, as pq carry writes them) with their series entries, and a changed "
    "commit of one of the line's variants goes back into its file; refused (exit 2, nothing written) "
    "unless the new series gives HEAD's tree and replays on every train tag of the line. Refused too "
    "(exit 2, nothing written): a patch with a `Bug:` trailer that names no regression test "
    "(`Upstream-Test: tests/...py`, its file under patches/upstream-tests/; a `Downstream:` patch needs none)."
)


def _export_arguments(exp: argparse.ArgumentParser) -> None:
    exp.add_argument("--dir", type=flags.path, default=None, help=WHERE)
    exp.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if patches/ or vendor/ would change (the head's tree only: exit 2 on a line's)",
    )
    flags.add_json(exp, help="print the result as JSON")


def _export(args: argparse.Namespace, layout: Layout) -> int:
    return write_back(layout, ExportOptions(_work_tree(args, layout), args.check, args.json))


_CARRY_DESCRIPTION = wrapped(
    "For each release line that is silent about PATCH (or whose variant pq carry made from an older "
    "version of it): map the patch's head paths onto the line's files (patches/lines.toml [line.maps]), "
    "apply it 3-way (never fuzz) on the newest train tag of the line after the line's own earlier "
    "entries, check the line's new series on every train tag of the line, and write the variant "
    "(Varies: and Carried-From: added to the patch's message) and its series entry. Every line is "
    "reported (Markdown on stdout, or --json; both written to --report): written, updated, up to date, "
    "taken, skipped, a hand-made variant left as it is, or one that needs a variant made by hand and why. "
    "Then the head line's series is replayed on every train tag of the head line (its older tags too, "
    "3-way from the blobs the series makes on the head's pristine tree) and the first tag where it "
    "conflicts is named, before `train add` would refuse it."
)


def _carry_arguments(car: argparse.ArgumentParser) -> None:
    car.add_argument(
        "patch", metavar="PATCH", nargs="?", help="a patch of patches/series: its file name or number (0002)"
    )
    car.add_argument("--all", action="store_true", help="every patch of patches/series, in order (instead of PATCH)")
    car.add_argument("--line", action="append", default=None, metavar="LINE", help="only this line (repeatable)")
    flags.add_json(car, help="print the report as JSON")
    flags.add_report(
        car,
        metavar="DIR",
        help="where carry-report.md and .json go (reports/pq-carry/); one that cannot be (created as) a "
        "writable directory is exit 2 before any line is carried",
    )


def _carry(args: argparse.Namespace, layout: Layout) -> int:
    if args.all == (args.patch is not None):
        raise BadInputError("name one PATCH to carry, or --all for every patch of patches/series (not both)")
    lines = tuple(args.line) if args.line is not None else None
    report = args.report.absolute() if args.report else None
    return carry_patches(layout, CarryOptions(args.patch, args.all, lines, args.json, report))


_DROP_DESCRIPTION = wrapped(
    "Take PATCH's commit out of the work tree (made by `pq import` when there is none) with `git rebase "
    "--onto`, the later commits replayed without it, then export as `pq export` does: patches/, "
    "patches/series and vendor/ in one swap, and what `pq carry` and `pq skip` wrote about PATCH in the "
    "release lines dropped with it (a variant made by hand stays, reported as a note)."
)


def _drop_arguments(drp: argparse.ArgumentParser) -> None:
    drp.add_argument("patch", metavar="PATCH", help="a patch of patches/series: its file name or number (0002)")
    drp.add_argument("--dir", type=flags.path, default=None, help=WHERE)
    flags.add_json(drp, help="print the export's result as JSON")


def _drop(args: argparse.Namespace, layout: Layout) -> int:
    return drop(layout, DropOptions(args.patch, _work_tree(args, layout), args.json))


_SKIP_DESCRIPTION = wrapped(
    "Write `skip PATCH: WHY` into the line's series (patches/lines/<line>/series), where the patch's "
    "entry belongs. Refused when the line already says something about PATCH."
)


def _skip_arguments(skp: argparse.ArgumentParser) -> None:
    skp.add_argument("patch", metavar="PATCH", help="a patch of patches/series: its file name or number")
    skp.add_argument("--line", required=True, metavar="LINE", help="the release line (patches/lines.toml)")
    skp.add_argument(
        "--reason",
        required=True,
        metavar="WHY",
        help="why the line does without it, in words: no `#`, no control character (exit 2)",
    )


def _skip(args: argparse.Namespace, layout: Layout) -> int:
    return skip_patch(layout, SkipOptions(args.patch, args.line, args.reason))


# The actions, in the order `pq --help` lists them: the one place an action is named.
ACTIONS = (
    Action(
        "import",
        "make the work tree: the pristine tag, then one commit per patch",
        _import_arguments,
        _import,
        _IMPORT_DESCRIPTION,
    ),
    Action("new", "write the message template of a new patch", _new_arguments, _new, _NEW_DESCRIPTION),
    Action("export", "write the commits back to patches/ and vendor/", _export_arguments, _export, _EXPORT_DESCRIPTION),
    Action("carry", "carry a common patch onto every older release line", _carry_arguments, _carry, _CARRY_DESCRIPTION),
    Action("drop", "take a patch out of the queue and export", _drop_arguments, _drop, _DROP_DESCRIPTION),
    Action(
        "skip", "a release line does without a common patch, and says why", _skip_arguments, _skip, _SKIP_DESCRIPTION
    ),
)
