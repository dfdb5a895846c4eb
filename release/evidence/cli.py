"""`python -m release evidence --line L | --tag T... [--python PY]`: prove a line's `skip` of a bug's patch.

The test runs in the line's proving environment, which the tool makes (release/evidence/envs.py), or
under `--python`; what it proves is read by `check` and `train add` (release/queue/skip_proof.py).
"""

from __future__ import annotations

import argparse

from release.core import flags
from release.core.layout import Layout
from release.evidence.proving import EvidenceOptions, prove_skips


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Prove a release line's `skip` of a bug's patch: the bug's regression test (patches/upstream-tests/) "
        "runs on each of the line's pristine vLLM releases in the line's proving environment, and where it passes "
        "cleanly the "
        "release does without the bug; the proof is kept in the evidence cache, where `check` and `train add` "
        "read it (they refuse a skip without it), and `scan` (a release it proves is not affected by the bug). "
        "Where the test fails, the release has the bug: exit 2, "
        "carry the fix to the line (`pq carry NAME`); an error proves nothing (exit 2). A `Downstream:` "
        "patch's skip needs no proof."
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--line", type=flags.name, metavar="LINE", help="every train tag on LINE (patches/train.toml)")
    which.add_argument(
        "--tag",
        nargs="+",
        type=flags.name,
        metavar="TAG",
        help="these tags: a train tag on its recorded line, another on --on's line or the scan data's",
    )
    parser.add_argument(
        "--on", type=flags.name, metavar="LINE", help="with --tag: the line of a tag the train does not hold yet"
    )
    parser.add_argument(
        "--python",
        type=flags.name,
        default=None,
        metavar="PYTHON",
        help="run the test under this interpreter instead (one with torch CPU, pytest and vLLM's import-time "
        "packages); default: the line's proving environment (envs/lines.toml), made by the tool with uv",
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    python = flags.interpreter(args.python) if args.python else None
    return prove_skips(layout, EvidenceOptions(python=python, line=args.line, tags=tuple(args.tag or ()), on=args.on))
