"""`python -m release publish DIST INDEX_DIR`: add wheels to a PEP 503 index directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from release.core.errors import BadInputError
from release.core.layout import Layout
from release.overlay.index import publish


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Add the wheels in DIST (a directory or one .whl) to the PEP 503 simple index in "
        "INDEX_DIR (created with its missing parents). Earlier releases stay; rerunning is a no-op; "
        "a file of the same name with different bytes is refused and the index is left unchanged. "
        "What an interrupted publish left (temporary files, a page that misses a renamed wheel or "
        "is truncated) is repaired first and reported; what no publish leaves (a listed file gone or "
        "changed, a stray file) is refused. One publish at a time per index (a lock in INDEX_DIR). "
        "Install with: pip install --index-url file://INDEX_DIR/simple vllm-fused-moe"
    )
    parser.add_argument("dist", type=Path, metavar="DIST", help="a directory of wheels, or one wheel")
    parser.add_argument("index", type=Path, metavar="INDEX_DIR", help="the index directory (holds simple/)")


def run(args: argparse.Namespace, layout: Layout) -> int:
    dist: Path = args.dist
    wheels = sorted(dist.glob("*.whl")) if dist.is_dir() else [dist]
    if not wheels or not wheels[0].exists():
        raise BadInputError(f"no wheel in {dist}", hint="build one with `python -m release build` (nox -s build)")
    outcome = publish(wheels, args.index.resolve())
    for line in outcome.repaired:
        print(f"note: {line}", file=sys.stderr)
    for name in outcome.added:
        print(f"published {name}")
    for name in outcome.already:
        print(f"already published (same bytes) {name}")
    print(f"index: file://{(args.index.resolve() / 'simple').as_posix()}")
    return 0
