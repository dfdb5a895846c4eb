"""`python -m release evidence --line L | --tag T... --python PY`: prove a line's `skip` of a bug's patch.

Run under an interpreter with torch (`nox -s evidence`); what it proves is read by `check` and
`train add` (release/queue/skip_proof.py), which run under the tooling's and cannot run the test.
"""

from __future__ import annotations

import argparse
import sys

from release.core import log
from release.core.errors import EXIT_OK, BadInputError, UnprovenSkipError
from release.core.files import present
from release.core.layout import Layout
from release.core.versions import canonical_tag, version_of_tag
from release.evidence.skips import SkipRun, prove
from release.model.lines import read_lines
from release.model.train import Train
from release.queue.bugs import scan_data


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Prove a release line's `skip` of a bug's patch: the bug's regression test (patches/upstream-tests/) "
        "runs on each of the line's pristine vLLM releases under --python, and where it passes cleanly the "
        "release does without the bug; the proof is kept in the evidence cache, where `check` and `train add` "
        "read it (they refuse a skip without it). Where the test fails, the release has the bug: exit 2, "
        "carry the fix to the line (`pq carry NAME`); an error proves nothing (exit 2). A `Downstream:` "
        "patch's skip needs no proof."
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--line", metavar="LINE", help="every train tag on LINE (patches/train.toml)")
    which.add_argument(
        "--tag",
        nargs="+",
        metavar="TAG",
        help="these tags: a train tag on its recorded line, another on --on's line or the scan data's",
    )
    parser.add_argument("--on", metavar="LINE", help="with --tag: the line of a tag the train does not hold yet")
    parser.add_argument(
        "--python",
        default=sys.executable,
        metavar="PYTHON",
        help="the interpreter the test runs under: one with torch (CPU), pytest and vLLM's import-time "
        "packages (`nox -s evidence` makes one); default: this one",
    )


def targets(layout: Layout, args: argparse.Namespace) -> list[tuple[str, str]]:
    """(tag, line) for each release to prove."""
    train = Train.load(layout.train) if present(layout.train) else Train(())
    if args.line:
        read_lines(layout.lines).get(args.line)  # an unknown line is refused, naming the known ones
        found = [(e.tag, e.line) for e in train.entries if e.line == args.line]
        if not found:
            raise BadInputError(f"no train tag is on line {args.line}", hint="give the tags: --tag TAG --on LINE")
        return found
    data = scan_data(layout) or {}
    found = []
    for text in args.tag:
        tag = canonical_tag(text)
        entry = train.get(tag)
        scanned = data.get("releases", {}).get(version_of_tag(tag))
        line = args.on or (entry.line if entry else "") or (scanned or {}).get("line", "")
        if not isinstance(line, str) or not line:
            raise BadInputError(f"{tag} is on no line the train or the scan data knows", hint="name it: --on LINE")
        read_lines(layout.lines).get(line)
        found.append((tag, line))
    return found


def run(args: argparse.Namespace, layout: Layout) -> int:
    runs: list[SkipRun] = []
    for tag, line in targets(layout, args):
        proved = prove(layout, tag, line, args.python)
        if not proved:
            log.out(f"{tag} (line {line}): its line skips no bug's patch; nothing to prove")
        runs += proved
    for skip in runs:
        log.out(skip.sentence())
    failed = [r for r in runs if not r.proven]
    if failed:
        raise UnprovenSkipError(
            what=f"{len(failed)} skip(s) not proven",
            skips=[r.sentence().removeprefix("not proven: ") for r in failed],
            hint="where the test fails, the release has the bug: carry the fix to the line "
            "(`python -m release pq carry NAME`) instead of skipping it; nothing was changed",
        )
    return EXIT_OK
