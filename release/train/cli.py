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
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypedDict

from release.core import log
from release.core.errors import (
    EXIT_OK,
    BadInputError,
    DirtyVendorError,
    OutputNotWritableError,
    TrainDriftError,
    UnknownTrainTagError,
)
from release.core.journal import write_atomic
from release.core.layout import Layout, writable_dir_problem
from release.core.lock import repo_lock
from release.core.versions import canonical_tag
from release.model.lines import read_lines
from release.model.source import Source
from release.model.train import Train
from release.queue.load import Queue, named_patch, require_accounted
from release.queue.snapshot import Checkout
from release.queue.verified import read_verified, wheel_range
from release.train.add import DEFAULT_TRAIN_SOURCE, MadeOn, record, refuse_unfixable, replay_for_add, save
from release.train.check import check_train
from release.train.watch import load_scan, watch

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
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add (or re-record) tags")
    add.add_argument("tags", nargs="*", metavar="TAG", help="vLLM release tags, e.g. v0.20.2")
    add.add_argument(
        "--from",
        dest="source",
        default=None,
        metavar="SOURCE",
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
    remove = actions.add_parser("remove", help="drop tags from the train")
    remove.add_argument("tags", nargs="+", metavar="TAG")
    listing = actions.add_parser("list", help="the train as a table")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    check = actions.add_parser("check", help="every tag reproduces its recorded hashes")
    check.add_argument("tags", nargs="*", metavar="TAG", help="only these tags (default: all)")
    watch = actions.add_parser("watch", help="add the new affected releases a scan found (the watch workflow)")
    watch.add_argument("scan", type=Path, metavar="SCAN_JSON", help="the output of `python -m release scan --json`")
    watch.add_argument(
        "--report", type=Path, default=None, metavar="FILE.md", help="write the Markdown report here, and FILE.json"
    )
    watch.add_argument(
        "--from", dest="source", default=DEFAULT_TRAIN_SOURCE, metavar="SOURCE", help="where to read new tags from"
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    action: str = args.action
    if action in ("add", "remove", "watch"):
        # They write patches/train.toml: one writer of the repository at a time (release.core.lock).
        with repo_lock(layout, f"train {action}"):
            return _run(args, layout, action)
    # Readers: they finish a swap a killed command left (and say so), and never wait for a writer.
    with repo_lock(layout, f"train {action}", shared=True):
        return _run(args, layout, action)


def _run(args: argparse.Namespace, layout: Layout, action: str) -> int:
    if action == "add":
        if args.all == bool(args.tags):
            raise BadInputError("`train add` takes TAG... or --all", hint="e.g. `python -m release train add v0.20.3`")
        if args.all:
            if args.source or args.line:
                raise BadInputError(
                    "--all re-reads every tag from its recorded source and line; it takes no --from/--line",
                    hint="to read tags from another source or onto a line, name them: "
                    "`python -m release train add TAG... --from SOURCE [--line LINE]`",
                )
            return run_add(layout, [], None)
        return run_add(layout, args.tags, Source.parse(args.source or DEFAULT_TRAIN_SOURCE), args.line)
    if action == "remove":
        return run_remove(layout, args.tags)
    if action == "list":
        return run_list(layout, args.json)
    if action == "watch":
        return run_watch(layout, args.scan, args.report, Source.parse(args.source))
    return run_check(layout, args.tags)


# --------------------------------------------------------------------------- add


def run_add(layout: Layout, tags: list[str], source: Source | None, line: str | None = None) -> int:
    """Add `tags` from `source`; with no tags (and no source), re-record the whole train."""
    tags = [canonical_tag(tag) for tag in tags]  # the one spelling train.toml holds
    if len(set(tags)) != len(tags):
        raise BadInputError(
            f"a tag is named twice: {' '.join(tags)}",
            hint=f"name each tag once: `python -m release train add {' '.join(dict.fromkeys(tags))}`",
        )
    checkout = Checkout.load(layout)  # under the lock: the tags below are replayed from this one read
    queue = checkout.queue
    require_accounted(layout, queue, checkout)
    train = checkout.require_train()
    sources = dict.fromkeys(tags, source) if source else {e.tag: e.recorded_source() for e in train.entries}
    # --all keeps each tag on its recorded line; new tags go on the named line, or the one they match.
    on_line = dict.fromkeys(tags, line) if tags else {e.tag: e.line for e in train.entries}
    tags = tags or train.tags
    if not tags:
        raise BadInputError(
            "the train is empty: nothing to re-record", hint="add a tag: `python -m release train add TAG`"
        )
    for tag in tags:
        # Before any release is read: a tag whose line's series carries no fix for a bug it has is refused.
        refuse_unfixable(checkout, tag, on_line.get(tag))
    found, base = checkout.drift()
    if found:
        # vendor/ is the head of the train and the source of the patches' pre-image blobs.
        raise DirtyVendorError(f"vendor/ is not pristine {queue.pin.tag} + series: " + "; ".join(d.path for d in found))
    made_on = MadeOn(train)  # each older line's base, read once for all its tags
    workers = min(len(tags), 4, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        # All or nothing: every tag is replayed before train.toml is written once.
        replays = list(
            pool.map(lambda tag: replay_for_add(checkout, base, tag, sources[tag], on_line.get(tag), made_on), tags)
        )
    for line_name, replay in replays:
        train = record(train, replay, sources[replay.tag], line_name)
    save(layout, train)
    return EXIT_OK


# ------------------------------------------------------------------------ remove


def run_remove(layout: Layout, tags: list[str]) -> int:
    """Drop every tag of `tags` in one write of train.toml, or none (each is checked first)."""
    tags = list(dict.fromkeys(canonical_tag(tag) for tag in tags))
    train = Train.load(layout.train)
    unknown = [tag for tag in tags if train.get(tag) is None]
    if unknown:
        raise UnknownTrainTagError(
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in the train "
            f"({', '.join(train.tags) or 'empty'}); nothing was removed"
        )
    head = Queue.load(layout).pin.tag
    if head in tags:
        raise BadInputError(
            f"{head} is the head of the train: vendor/ holds it; nothing was removed",
            hint="rebase vendor/ onto another train tag first (`python -m release rebase TAG`), then remove it",
        )
    for tag in tags:
        train = train.without(tag)
    save(layout, train)
    log.out(f"removed {', '.join(tags)}; the train is {', '.join(train.tags)}")
    return EXIT_OK


# -------------------------------------------------------------------------- list


class TrainRow(TypedDict):
    """One tag of `train list --json` (its keys are what the JSON holds)."""

    tag: str
    version: str
    head: bool
    line: str
    source: str
    wheel: str
    wheel_sha256: str
    commit: str
    flashinfer_pin: str
    # None: no verified FlashInfer fits, the tag does not build; "": no patch it carries relies on FlashInfer
    flashinfer_range: str | None
    files: int
    patches: list[str]  # what its replay applies, in order (train.toml `patches`)
    bugs: list[str]  # the bugs those patches fix (their Bug: ids); empty: it carries downstream changes only
    carries: str  # "bug" (there for a bug) or "downstream" (only downstream changes)
    patched_files: list[str]
    pristine: dict[str, str]
    patched: dict[str, str]


def rows(layout: Layout) -> tuple[str, list[TrainRow]]:
    head = Queue.load(layout).pin.tag
    train = Train.load(layout.train).require_head(layout.train, head)
    verified = read_verified(layout.verified_toml)
    lines = read_lines(layout.lines)
    out: list[TrainRow] = []
    for e in train.entries:
        found = [named_patch(layout, lines.get(e.line), name) for name in e.patches]
        bugs = sorted({p.purpose.bug for p in found if p is not None and p.purpose.bug})
        out.append(
            {
                "tag": e.tag,
                "version": e.version,
                "head": e.tag == head,
                "line": e.line,
                "source": e.source,
                "wheel": e.wheel,
                "wheel_sha256": e.wheel_sha256,
                "commit": e.commit,
                "flashinfer_pin": e.flashinfer,
                # What the tag's wheel will require; null: no verified version fits, the tag does not build;
                # "": it carries no patch that relies on FlashInfer (Depends-On), so it requires nothing of it.
                "flashinfer_range": wheel_range(verified, e.flashinfer, [p for p in found if p is not None]),
                "files": len(e.pristine),
                "patches": list(e.patches),
                "bugs": bugs,
                "carries": "bug" if bugs else "downstream",
                "patched_files": sorted(n for n, d in e.patched.items() if e.pristine.get(n) != d),
                "pristine": e.pristine,
                "patched": e.patched,
            }
        )
    return head, out


def run_list(layout: Layout, as_json: bool) -> int:
    if as_json:
        head, table = rows(layout)
        log.out(json.dumps({"head": head, "releases": table}, indent=2, sort_keys=True))
    else:
        log.out(table_text(layout), end="")
    return EXIT_OK


def table_text(layout: Layout) -> str:
    head, table = rows(layout)
    header = ("tag", "line", "from", "flashinfer pin", "wheel requires", "patched files", "carries")
    lines = [
        (
            f"{r['tag']}{' *' if r['head'] else ''}",
            r["line"],
            r["wheel"] or (f"{r['source']} @ {r['commit'][:12]}" if r["commit"] else r["source"]),
            (r["flashinfer_pin"] or "?").removeprefix("flashinfer-python"),
            "none verified: not built" if r["flashinfer_range"] is None else r["flashinfer_range"] or "(nothing)",
            f"{len(r['patched_files'])} of {r['files']}",
            carries(r),
        )
        for r in table
    ]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    out = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *lines]
    ]
    out.append(f"* the head: vendor/ holds {head}; {len(table)} tags in patches/train.toml")
    return "\n".join(out) + "\n"


def carries(row: TrainRow) -> str:
    """What a tag's overlay is there for: the bugs it fixes (by their patches' numbers), or downstream only."""
    numbers = ", ".join(name.split("-", 1)[0] for name in row["patches"])
    if row["carries"] == "bug":
        return f"bug fix ({numbers})"
    return f"downstream only ({numbers})" if numbers else "nothing"


# ------------------------------------------------------------------------- check


def run_check(layout: Layout, tags: list[str]) -> int:
    results = check_train(layout, tags or None)
    for result in results:
        if result.ok:
            log.out(f"ok    {result.tag}  ({result.seconds:.2f} s)")
        for finding in result.findings:
            log.out(f"FAIL  {finding.line()}")
    bad = [r for r in results if not r.ok]
    if bad:
        named = "; ".join(f"{r.tag} ({', '.join(sorted({f.file for f in r.findings}))})" for r in bad)
        raise TrainDriftError(
            f"train check: {len(bad)} of {len(results)} tags do not reproduce their recorded hashes: {named}"
        )
    log.out(f"train check: all {len(results)} tags reproduce their recorded pristine and patched sha256")
    return EXIT_OK


# ------------------------------------------------------------------------- watch


def run_watch(layout: Layout, scan_path: Path, report_path: Path | None, source: Source) -> int:
    if report_path is not None:  # checked before any tag is added, not after
        problem = writable_dir_problem(report_path.parent)
        if problem is None and report_path.is_dir():
            problem = f"{report_path} is a directory"
        if problem:
            raise OutputNotWritableError(f"--report {report_path}: {problem}; nothing was done")
    report = watch(layout, load_scan(scan_path), source)
    for line in report.lines:
        log.out(line)
    if not report.lines:
        log.out(f"nothing newer than {report.newest_before} in {scan_path}")
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(report_path, report.to_markdown(table_text(layout)).encode("utf-8"))
        # The same facts for the workflow: which tags were added, which are upstream, refused, absent.
        write_atomic(report_path.with_suffix(".json"), report.to_json().encode("utf-8"))
        log.note(f"report: {report_path}")
    return EXIT_OK
