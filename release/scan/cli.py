"""`python -m release scan`: classify every vLLM release on the index for each patch."""

from __future__ import annotations

import argparse

from release.core import flags
from release.core.layout import Layout
from release.core.versions import release_version
from release.pristine.index import DEFAULT_INDEX_URL, INDEX_ENV
from release.scan.run import ScanOptions
from release.scan.update import update

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
  skipped   the release's line does without it: a claim (affected), unless the bug's test
            passing on the release proves it (`evidence`, the proof check reads): then
            not-affected, and the release lists the patch under `proven_skips`

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
    return update(
        ScanOptions(
            layout,
            since=release_version(args.since) if args.since else None,
            until=release_version(args.until) if args.until else None,
            dry_run=args.dry_run,
            shown="json" if args.json else "markdown" if args.markdown else "summary",
        )
    )
