"""`python -m release publish DIST INDEX_DIR`: add our wheels to a PEP 503 index directory.

The stage is release/overlay/publish.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from release.core import flags
from release.core.layout import Layout
from release.overlay.build import PROJECT
from release.overlay.publish import PublishOptions, publish_wheels


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"Add the {PROJECT} wheels in DIST (a directory or one .whl) to the PEP 503 index in INDEX_DIR "
        "(created if missing), and write INDEX_DIR/requirements/vllm-X.txt for each vLLM release X: our "
        "newest wheel for X, pinned by version and sha256. Users install through that file, never by name "
        f"(pip install --no-index --find-links URL/simple/{PROJECT}/ -r URL/requirements/vllm-X.txt; "
        "docs/overlay.md, 'Install'). Nothing is written unless `check` passes, each wheel is byte for byte "
        "its build again at the commit it names, and each recorded bug's test fails on the pristine release, "
        "passes with it and fails with it built without the fix (--python). "
        "Refusals (exit 2, index unchanged), repairs: docs/overlay.md, 'The index'."
    )
    parser.add_argument("dist", type=Path, metavar="DIST", help="a directory of wheels, or one wheel")
    parser.add_argument("index", type=Path, metavar="INDEX_DIR", help="the index directory (holds simple/)")
    parser.add_argument(
        "--python",
        default=sys.executable,
        metavar="PYTHON",
        help="the interpreter the evidence runs under: one with torch (CPU) and vLLM's import-time packages, "
        "pytest and pip (`nox -s publish` makes one); default: this one",
    )
    flags.add_allow_dirty(
        parser,
        help="publish a dirty build (`build --allow-dirty`, version X+fm.N.dirty) too; refused without it "
        "(exit 2), as its requirements file would pin it: only for an index no user installs from",
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    return publish_wheels(
        layout,
        PublishOptions(dist=args.dist, index=args.index, python=args.python, allow_dirty=args.allow_dirty),
    )
