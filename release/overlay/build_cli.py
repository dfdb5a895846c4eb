"""`python -m release build`: the overlay wheel(s) into dist/."""

from __future__ import annotations

import argparse
from pathlib import Path

from release.core import flags, log
from release.core.errors import TagsNotBuiltError
from release.core.layout import Layout
from release.overlay.backend import Isolation
from release.overlay.build import build
from release.overlay.target import BuildPlan, BuildResult
from release.overlay.train_build import build_train


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Build the pure-Python wheel vllm-fused-moe (our runtime code from release/overlay/runtime/: the "
        "import hook and the doctor; upstream's vendored files and their pins from vendor/vllm_fused_moe/) "
        "with hatchling (through PyPA build when isolated); reproducible: SOURCE_DATE_EPOCH is HEAD's commit time. "
        "Without --all or --tag: the head of the train, from vendor/. Each wheel requires "
        "vllm==<its tag>; a wheel that carries a patch whose Depends-On names flashinfer-python (0001: "
        "VERIFIED.toml is its contract) requires flashinfer-python in (its tag's own pin ∩ VERIFIED.toml), "
        "one that carries none asks nothing of FlashInfer. A tag whose pin admits no verified version for "
        "such a patch is refused. "
        "A dirty tree (vendor/ not pristine + series, or, in a git checkout, uncommitted or extra "
        "files in vendor/vllm_fused_moe/, release/overlay/runtime/ or patches/) is refused: the wheel "
        "would claim a commit it "
        "is not. Links are refused always. Refused too (exit 2), before anything is built: a tag whose "
        "series carries no patch for a bug the tag has (patches/train.toml records each tag's bugs; the scan "
        "data adds its findings); a tag that carries a release line's variant `pq carry` made from another "
        "version of its common patch (stale: carry it again); a tag whose carried patches are not the ones "
        "patches/train.toml records for its patch level (re-record it with `train add`; a --allow-dirty "
        "build is not held to that, its version says .dirty). The patch level follows the bytes the wheel "
        "ships: a tag's wheel whose files (everything it installs but its build information) differ from "
        "those patches/train.toml records for its level is built one level up, and the new level and files "
        "are recorded there (`shipped`; not by --allow-dirty); a rebuild of the same files writes nothing. "
        "Named tags (--tag) are all or nothing: one "
        "refused tag, exit 2, and nothing is built. --all builds every tag it can and then names each it "
        "could not, with the reason (exit 1); build those alone with --tag once fixed."
    )
    parser.add_argument("--out", type=flags.path, default=Path("dist"), help="where the wheels go (default: dist/)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--all",
        action="store_true",
        help="one wheel per tag of patches/train.toml; every tag is first reproduced from its pristine "
        "source + series and held to its recorded hashes (`train check`)",
    )
    which.add_argument(
        "--tag",
        dest="tags",
        action="append",
        metavar="TAG",
        help="build the wheel of this train tag (repeatable), reproduced like --all",
    )
    parser.add_argument(
        "--patch-level",
        type=int,
        default=None,
        metavar="N",
        help="the N of the version <vllm>+fm.N (default: the level patches/train.toml records for the tag, one "
        "up when the wheel's files differ from those that level shipped; `train add` and `rebase` raise it "
        "when what the tag carries changes; for a head the train does not hold, the number of patches it "
        "carries). For a train tag N is recorded in patches/train.toml; below its recorded level (or at it, "
        "with other files) is refused (exit 2): a tag's level only goes up",
    )
    parser.add_argument(
        "--isolation",
        choices=[choice.value for choice in Isolation],
        default=Isolation.AUTO.value,
        help="build isolation: auto uses the installed backend when it is the pinned version",
    )
    flags.add_allow_dirty(
        parser,
        help="build a dirty tree anyway: the version ends in .dirty (0.20.0+fm.1.dirty) and the build "
        "info lists what is dirty; such a build records no patch level in patches/train.toml",
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    plan = BuildPlan(layout, args.out, args.patch_level, Isolation(args.isolation), args.allow_dirty)
    try:
        results = build_train(plan, None if args.all else args.tags) if args.all or args.tags else [build(plan)]
    except TagsNotBuiltError as exc:  # --all: the wheels it could build are delivered; say them, then the rest
        report([r for r in exc.built if isinstance(r, BuildResult)], args.out)
        raise
    report(results, args.out)
    return 0


def report(results: list[BuildResult], out: Path) -> None:
    for result in results:
        show(result)
    if len(results) > 1:
        log.out(f"{len(results)} wheels in {out}: {sum(r.seconds for r in results):.1f} s in all")


def show(result: BuildResult) -> None:
    log.out(f"{result.wheel}")
    log.out(
        f"  vLLM {result.tag}  version {result.version}  sha256 {result.sha256}  {result.size} bytes  "
        f"{result.seconds:.1f} s  SOURCE_DATE_EPOCH={result.source_date_epoch}  "
        f"{'isolated' if result.isolated else 'no isolation'}"
    )
