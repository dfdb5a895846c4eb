"""`python -m release build`: the overlay wheel into dist/."""

from __future__ import annotations

import argparse
from pathlib import Path

from release.core.layout import Layout
from release.overlay.build import BuildPlan, build


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Build the pure-Python wheel vllm-fused-moe (vendor/vllm_fused_moe/ plus the import hook) "
        "with PyPA build and hatchling; reproducible: SOURCE_DATE_EPOCH is HEAD's commit time. "
        "A dirty tree (vendor/ not pristine + series, or, in a git checkout, uncommitted or extra "
        "files in vendor/vllm_fused_moe/ or patches/) is refused: the wheel would claim a commit it "
        "is not. Links are refused always."
    )
    parser.add_argument("--out", type=Path, default=Path("dist"), help="where the wheel goes (default: dist/)")
    parser.add_argument(
        "--patch-level",
        type=int,
        default=None,
        metavar="N",
        help="the N of the version <vllm>+fm.N (default: the number of patches in the series); "
        "raise it when a release changes the wheel but not the number of patches",
    )
    parser.add_argument(
        "--isolation",
        choices=["auto", "on", "off"],
        default="auto",
        help="build isolation: auto uses the installed backend when it is the pinned version",
    )

    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="build a dirty tree anyway: the version ends in .dirty (0.20.0+fm.1.dirty) and the build "
        "info lists what is dirty",
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    result = build(BuildPlan(layout, args.out, args.patch_level, args.isolation, args.allow_dirty))
    print(f"{result.wheel}")
    print(
        f"  version {result.version}  sha256 {result.sha256}  {result.size} bytes  "
        f"{result.seconds:.1f} s  SOURCE_DATE_EPOCH={result.source_date_epoch}  "
        f"{'isolated' if result.isolated else 'no isolation'}"
    )
    return 0
