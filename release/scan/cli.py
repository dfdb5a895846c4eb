"""`python -m release scan`: classify every vLLM release on the index for each patch."""

from __future__ import annotations

import argparse
from typing import Any

from release.core import flags, log
from release.core.errors import EXIT_OK, OutputNotWritableError
from release.core.journal import write_atomic
from release.core.layout import Layout, writable_dir_problem
from release.core.versions import release_version
from release.model.outcome import ReleaseStatus
from release.pristine.index import DEFAULT_INDEX_URL, INDEX_ENV
from release.scan.document import build_document, dumps, load_document, to_markdown
from release.scan.run import ScanOptions, human_bytes, scan, train_versions

EPILOG = f"""what it prints: a few lines, how many releases of each status (oldest … newest) and the
affected ones the train does not ship; --markdown prints the whole table instead, --json the
whole document (both as written to the files below).

what it writes (unless --dry-run):
  docs/affected-releases.md  the table, for people
  release/overlay/runtime/vllm_fused_moe/affected-releases.json
                             the same data, shipped in every overlay wheel
                             (schema: docs/affected-releases.schema.json);
                             doctor reads it
  A scan of a range updates that range and keeps the rest of the previous document.

per patch and release:
  applies   the patch applies: the release has the bug (status: affected)
  upstream  its change is already in the release (status: fixed, when none applies)
  absent    the files it changes are not in the release (status: not-affected)
  conflict  neither: the code moved; the release needs a variant of the patch (affected)

the index: ${INDEX_ENV} (default {DEFAULT_INDEX_URL}), a PEP 691/503 simple index.
Each wheel is read with HTTP range requests (central directory + the line's modules + METADATA
+ RECORD, a few hundred kB), from the cache when it holds them, or downloaded whole where the
server refuses ranges. Every member used is checked against its wheel's RECORD: a lazy read
proves membership, not identity (the documents' `wheel_sha256` is the index's claim, and both
outputs say so under "read"). Progress goes to stderr.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "List every final vLLM release on the package index (post releases and build-tagged wheels "
        "included, pre-releases left out) and classify each patch of patches/series and patches/retired/ "
        "on it with rebase's classifier."
    )
    parser.epilog = EPILOG
    flags.add_from(parser, default="pypi", choices=["pypi"], help="where releases are listed and read from")
    parser.add_argument(
        "--since",
        metavar="TAG",
        default=None,
        help="the oldest release to scan, e.g. v0.17.0 (a final release, at most 40 characters)",
    )
    parser.add_argument("--until", metavar="TAG", default=None, help="the newest release to scan, e.g. v0.22.1")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--markdown", action="store_true", help="print the whole table (docs/affected-releases.md)")
    flags.add_json(shown, help="print the whole JSON document (what `train watch` reads)")
    parser.add_argument("--dry-run", action="store_true", help="print only; write neither file")


def run(args: argparse.Namespace, layout: Layout) -> int:
    options = ScanOptions(
        layout,
        since=release_version(args.since) if args.since else None,
        until=release_version(args.until) if args.until else None,
    )
    if not args.dry_run:  # checked before the scan, which may take minutes, not after it
        for output in (layout.affected_json, layout.affected_md):
            problem = writable_dir_problem(output.parent)
            if problem:
                raise OutputNotWritableError(f"cannot write {output}: {problem}; nothing was scanned")
    previous = load_document(layout.affected_json)
    train = train_versions(layout)
    result = scan(options)
    document, dropped = build_document(result, options, previous, train)
    if dropped:
        log.note(
            f"dropped {len(dropped)} release(s) classified for other patches before: {', '.join(dropped)}; rescan them"
        )
    moved = result.transfer
    log.note(
        f"scanned {len(result.results)} release(s) in {result.seconds:.1f} s: "
        f"{human_bytes(moved.bytes)} downloaded in {moved.requests} request(s)"
    )
    markdown = to_markdown(document)
    if not args.dry_run:
        write_atomic(layout.affected_json, dumps(document).encode("utf-8"))
        layout.affected_md.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(layout.affected_md, markdown.encode("utf-8"))
        log.note(f"wrote {layout.affected_md} and {layout.affected_json}")
    if args.json or args.markdown:
        log.out(dumps(document) if args.json else markdown, end="")
    else:
        log.out(summary(document, [r.version for r in result.results]))
    return EXIT_OK


def summary(document: dict[str, Any], scanned: list[str]) -> str:
    """What a scan found, in a few lines: how many releases of each status, from the oldest to the newest,
    and the affected ones that the train does not ship yet (what to act on)."""
    releases = document["releases"]
    out = [f"scanned {len(scanned)} release(s); the document holds {len(releases)}"]
    for status in ReleaseStatus:
        these = [v for v in scanned if releases[v]["status"] == status]
        if these:
            span = ", ".join(these) if len(these) <= 3 else f"{these[0]} … {these[-1]}"
            out.append(f"  {status.value:<13} {len(these):>3}  {span}")
    missing = [v for v in scanned if releases[v]["status"] == ReleaseStatus.AFFECTED and not releases[v]["in_train"]]
    if missing:
        out.append(f"affected and not in the train: {', '.join(missing)}")
    if document.get("fixed_in"):
        out.append(f"fixed upstream in {document['fixed_in']}")
    out.append("the whole table: --markdown (docs/affected-releases.md); the JSON document: --json")
    return "\n".join(out)
