"""`python -m release pq import|new|export`: edit the patch queue as git commits."""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from pathlib import Path

from release.core import log
from release.core.errors import EXIT_CONFLICT, EXIT_OK, BadInputError
from release.core.layout import Layout
from release.pq.carry import carry, carry_all, reports_json, reports_markdown, skip
from release.pq.drop import drop_patch
from release.pq.export import Export, export_queue
from release.pq.importer import import_queue
from release.pq.line import export_line, import_line, is_line_tree
from release.pq.names import SLUG_LENGTH
from release.pq.new import new_patch
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
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    where = "the work tree (default: .work/pq/ in the checkout)"

    imp = actions.add_parser(
        "import",
        help="make the work tree: the pristine tag, then one commit per patch",
        description=wrapped(
            "Make a git work tree with upstream paths: one commit holding the pinned tag's pristine "
            "subtree (recovered from vendor/ by undoing the series: no network; tagged `pristine`), then one "
            "commit per patch of patches/series, in order, with the mail's author, date and message and a "
            "`Patch-Name:` line. An older work tree is replaced only when everything in it was exported."
        ),
    )
    imp.add_argument(
        "--dir", type=Path, default=None, help=where + "; one that cannot be (created as) a directory is exit 2"
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

    new = actions.add_parser(
        "new",
        help="write the message template of a new patch",
        description=wrapped(
            "Write .git/pq-template in the work tree: the message a new patch starts from, named "
            "NNNN-SLUG.patch with the next number no patch has used. Commit with `git -C DIR commit -t "
            ".git/pq-template` and answer every <...>."
        ),
    )
    new.add_argument(
        "slug",
        metavar="SLUG",
        help=f"the file name's words, e.g. shape-check: lowercase letters, digits and '-', at most {SLUG_LENGTH} "
        "characters (exit 2 otherwise)",
    )
    new.add_argument("--dir", type=Path, default=None, help=where)

    exp = actions.add_parser(
        "export",
        help="write the commits back to patches/ and vendor/",
        description=wrapped(
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
        ),
    )
    exp.add_argument("--dir", type=Path, default=None, help=where)
    exp.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if patches/ or vendor/ would change (the head's tree only: exit 2 on a line's)",
    )
    exp.add_argument("--json", action="store_true", help="print the result as JSON")

    car = actions.add_parser(
        "carry",
        help="carry a common patch onto every older release line",
        description=wrapped(
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
        ),
    )
    car.add_argument(
        "patch", metavar="PATCH", nargs="?", help="a patch of patches/series: its file name or number (0002)"
    )
    car.add_argument("--all", action="store_true", help="every patch of patches/series, in order (instead of PATCH)")
    car.add_argument("--line", action="append", default=None, metavar="LINE", help="only this line (repeatable)")
    car.add_argument("--json", action="store_true", help="print the report as JSON")
    car.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="where carry-report.md and .json go (reports/pq-carry/); one that cannot be (created as) a "
        "writable directory is exit 2 before any line is carried",
    )

    drp = actions.add_parser(
        "drop",
        help="take a patch out of the queue and export",
        description=wrapped(
            "Take PATCH's commit out of the work tree (made by `pq import` when there is none) with `git rebase "
            "--onto`, the later commits replayed without it, then export as `pq export` does: patches/, "
            "patches/series and vendor/ in one swap, and what `pq carry` and `pq skip` wrote about PATCH in the "
            "release lines dropped with it (a variant made by hand stays, reported as a note)."
        ),
    )
    drp.add_argument("patch", metavar="PATCH", help="a patch of patches/series: its file name or number (0002)")
    drp.add_argument("--dir", type=Path, default=None, help=where)
    drp.add_argument("--json", action="store_true", help="print the export's result as JSON")

    skp = actions.add_parser(
        "skip",
        help="a release line does without a common patch, and says why",
        description=wrapped(
            "Write `skip PATCH: WHY` into the line's series (patches/lines/<line>/series), where the patch's "
            "entry belongs. Refused when the line already says something about PATCH."
        ),
    )
    skp.add_argument("patch", metavar="PATCH", help="a patch of patches/series: its file name or number")
    skp.add_argument("--line", required=True, metavar="LINE", help="the release line (patches/lines.toml)")
    skp.add_argument(
        "--reason",
        required=True,
        metavar="WHY",
        help="why the line does without it, in words: no `#`, no control character (exit 2)",
    )


def run(args: argparse.Namespace, layout: Layout) -> int:

    if args.action == "carry":
        return run_carry(layout, args.patch, args.all, args.line, args.json, args.report)
    if args.action == "skip":
        where = skip(layout, args.patch, args.line, args.reason)
        print(f"wrote {where.relative_to(layout.root).as_posix()}: skip {args.patch} ({args.reason})")
        return EXIT_OK
    path = args.dir.absolute() if args.dir else default_dir(layout)
    if args.action == "import" and (args.line or args.tag):
        return run_import_line(layout, path, args.line, args.tag, args.force)
    if args.action == "import":
        return run_import(layout, path, args.force)
    if args.action == "new":
        return run_new(layout, path, args.slug)
    if args.action == "drop":
        return show_export(drop_patch(layout, path, args.patch), path, False, args.json)
    return run_export(layout, path, args.check, args.json)


def shown(path: Path) -> str:
    """A path as the maintainer typed it: relative to here when inside it."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else relative


def run_import(layout: Layout, path: Path, force: bool) -> int:

    done = import_queue(layout, path, force)
    log.out(
        f"{'replaced' if done.replaced else 'made'} {shown(path)}: vllm {done.tag} pristine (tag `pristine`), "
        f"then {len(done.patches)} patch commit(s) on branch patch-queue"
    )
    for patch in done.patches:
        log.out(f"  {patch.name}  {patch.subject}")
    log.out(
        f"next: change the commits with git in {shown(path)}; `python -m release pq new SLUG` starts a new "
        "patch's message; `python -m release pq export` writes patches/ and vendor/"
    )
    return EXIT_OK


def run_import_line(layout: Layout, path: Path, line: str | None, tag: str | None, force: bool) -> int:
    done = import_line(layout, path, line, tag, force)
    log.out(
        f"{'replaced' if done.replaced else 'made'} {shown(path)}: line {done.line}, vllm {done.tag} pristine "
        f"(tag `pristine`), then the line's series on branch patch-queue"
    )
    for name in done.patches:
        log.out(f"  {name}{'  (common patch, for the line)' if name in done.wanted else ''}")
    for name, files in done.left_out.items():
        taken = "the parts on the line are in its commit above" if name in done.wanted else "nothing of it is"
        log.out(
            f"  {name}: the line has no counterpart of {', '.join(files)} (patches/lines.toml [line.maps]); "
            f"{taken}: add what the line needs as a commit with `Patch-Name: {name}` (export writes it as the "
            "line's variant)"
        )
    if done.stopped is not None:
        name, message = done.stopped
        log.out(
            f"{name} does not merge on {done.tag}: git am stopped there ({message.strip().splitlines()[0]}). "
            f"Resolve it in {shown(path)} (`git status` lists the files with conflict markers), `git add` them, "
            "`git am --continue`; then `python -m release pq export`"
        )
        return EXIT_CONFLICT
    log.out(
        f"next: change the commits with git in {shown(path)}; `python -m release pq export` writes the line's variants"
    )
    return EXIT_OK


def run_new(layout: Layout, path: Path, slug: str) -> int:

    name, file = new_patch(layout, path, slug)
    log.out(f"template: {shown(file)} ({name})")
    log.out(
        f"next: change the files under {shown(path)}, then `git -C {shown(path)} commit -a -t "
        f"{file.relative_to(path).as_posix()}` and answer every <...>; then `python -m release pq export`"
    )
    return EXIT_OK


def run_export(layout: Layout, path: Path, check_only: bool, as_json: bool) -> int:
    if is_line_tree(path):
        if check_only:
            raise BadInputError(f"{shown(path)} is a release line's tree: `pq export --check` is for the head's")
        done = export_line(layout, path)
        if as_json:
            log.out(json.dumps(done.__dict__, indent=2))
            return EXIT_OK
        for name in done.variants:
            log.out(f"{name}  variant of line {done.line}")
        log.out(f"wrote {', '.join(done.written)}" if done.written else "nothing to write")
        if done.written:
            log.out("next: `python -m release check`, then `python -m release train add --all`")
        return EXIT_OK
    return show_export(export_queue(layout, path, check_only), path, check_only, as_json)


def show_export(result: Export, path: Path, check_only: bool, as_json: bool) -> int:
    if as_json:
        log.out(json.dumps(result.as_json(), indent=2))
        return EXIT_OK
    width = max((len(p.name) for p in result.patches), default=0)
    for patch in result.patches:
        log.out(f"{patch.name:<{width}}  {patch.status:<9}  {patch.subject}")
    for name in result.dropped:
        log.out(f"{name:<{width}}  dropped")
    for note in result.notes:
        log.out(f"note: {note}")
    if not result.changed:
        log.out(f"patches/ and vendor/ are what {shown(path)} exports, byte for byte: nothing to write")
        return EXIT_OK
    if check_only:  # not reached: a difference is PatchQueueStaleError
        return EXIT_OK
    log.out(f"wrote in one swap: {', '.join(result.changed_paths)}")
    moved = [p.name for p in result.patches if p.status != "unchanged"]
    if moved:
        log.out(
            f"next: carry {', '.join(moved)} onto the release lines (`python -m release pq carry --all`), then "
            "`python -m release check` and re-record the train: `python -m release train add --all` and "
            "`python -m release train check` (every tag's patched files follow the series)"
        )
    elif any(not p.startswith("patches/") for p in result.changed_paths):
        log.out(
            "next: `python -m release check`, then re-record the train: `python -m release train add --all` "
            "and `python -m release train check` (every tag's patched files follow the series)"
        )
    return EXIT_OK


def run_carry(
    layout: Layout, patch: str | None, every: bool, lines: list[str] | None, as_json: bool, report: Path | None
) -> int:
    if every == (patch is not None):
        raise BadInputError("name one PATCH to carry, or --all for every patch of patches/series (not both)")
    where = report.absolute() if report else None
    done = carry_all(layout, lines, where) if every else [carry(layout, patch or "", lines, where)]
    print(reports_json(done) if as_json else reports_markdown(done), end="")
    return EXIT_CONFLICT if any(r.head_conflicts for r in done) else EXIT_OK
