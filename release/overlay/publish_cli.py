"""`python -m release publish DIST INDEX_DIR`: add our wheels to a PEP 503 index directory.

The stage is release/overlay/publish.py."""

from __future__ import annotations

import argparse
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
        "docs/overlay.md, 'Install'). Rerunning is a no-op; nothing is written unless every wheel passes. "
        "Each wheel first proves its fixes (INDEX_DIR/evidence/<wheel>.json) in its line's proving environment "
        "(envs/). "
        "What is refused (exit 2, index unchanged) and what is repaired: docs/overlay.md, 'The index'."
    )
    parser.add_argument("dist", type=Path, metavar="DIST", help="a directory of wheels, or one wheel")
    parser.add_argument("index", type=Path, metavar="INDEX_DIR", help="the index directory (holds simple/)")
    parser.add_argument(
        "--python",
        default=None,
        metavar="PYTHON",
        help="run the evidence under this interpreter instead (one with torch CPU, vLLM's import-time packages, "
        "pytest and pip); default: each release line's proving environment (envs/lines.toml), made by the tool",
    )
    flags.add_allow_dirty(
        parser,
        help="publish a dirty build (`build --allow-dirty`, version X+fm.N.dirty) too; refused without it "
        "(exit 2), as its requirements file would pin it: only for an index no user installs from",
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    return publish_wheels(
        layout,
        PublishOptions(
            dist=flags.absolute(args.dist),
            index=flags.absolute(args.index),
            python=flags.interpreter(args.python) if args.python else None,
            allow_dirty=args.allow_dirty,
        ),
    )
