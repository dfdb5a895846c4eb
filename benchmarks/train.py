"""Wall time of `train check` and `build --all`, per train tag and for the whole train.

Not a test: every figure is a real `python -m release` process (median of --runs), on this
checkout or on a throw-away copy of it, with the release wheels already cached (the first
run warms the cache). Also prints each wheel's size and whether every run gave the same
sha256.

    python benchmarks/train.py [--runs 3] [--per-tag-runs N] [--timing-only-verified 0.6.6]

Its last lines are the figures docs/maintainers.md and docs/patch-queue.md quote: one tag, the whole
train, and the wheel sizes, each as min-max (median).

--timing-only-verified VERSION adds VERSION to the copy's VERIFIED.toml, so that tags whose
FlashInfer pin is not verified yet can be timed too; those wheels are timing artefacts,
never to be published (the copy and its wheels are deleted at the end).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from release.core.layout import Layout  # noqa: E402
from release.queue.snapshot import Checkout  # noqa: E402
from release.queue.verified import read_verified  # noqa: E402


def release(root: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "release", "--root", str(root), *args], cwd=REPO, capture_output=True, text=True
    )
    return time.perf_counter() - start, proc


def timed(root: Path, runs: int, *args: str) -> list[float]:
    times = []
    for _ in range(runs):
        seconds, proc = release(root, *args)
        if proc.returncode != 0:
            raise SystemExit(f"`release {' '.join(args)}` failed ({proc.returncode}): {proc.stderr[-1500:]}")
        times.append(seconds)
    return times


def copy_project(tmp: Path, also_verified: list[str]) -> Path:
    root = tmp / "project"
    for name in ("vendor", "patches", "release/overlay/runtime"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    verified = root / "vendor" / "vllm_fused_moe" / "VERIFIED.toml"
    text = verified.read_text()
    for version in also_verified:
        entry = f'  {{ version = "{version}", how = "benchmarks/train.py --timing-only-verified: NOT verified" }},\n'
        text = text.replace("verified = [\n", "verified = [\n" + entry, 1)
    verified.write_text(text)
    return root


def row(name: str, values: list[float], extra: str = "") -> str:
    return f"| {name} | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} | {extra} |"


def span(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f} s ({statistics.median(values):.1f} s)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each whole-train figure")
    parser.add_argument("--per-tag-runs", type=int, default=None, help="runs of each per-tag figure (default: --runs)")
    parser.add_argument("--timing-only-verified", action="append", default=[], metavar="VERSION")
    args = parser.parse_args()
    per_tag_runs = args.per_tag_runs or args.runs
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp_name:
        tmp = Path(tmp_name)
        root = copy_project(tmp, args.timing_only_verified)
        layout = Layout(root)
        train = Checkout.load(layout).require_train()
        verified = read_verified(layout.verified_toml)
        buildable = [e.tag for e in train.entries if verified.range_for(e.flashinfer) is not None]
        timed(root, 1, "train", "check")  # warm the wheel cache and the page cache

        runs = f"{per_tag_runs} runs a tag, {args.runs} of the whole train"
        print(f"train: {', '.join(train.tags)}; {runs}; wheels cached")
        print("\n`train check` (one process per run)\n")
        print("| tags | min s | median s | max s | notes |")
        print("| --- | --- | --- | --- | --- |")
        checks: list[float] = []
        for tag in train.tags:
            checks += (times := timed(root, per_tag_runs, "train", "check", tag))
            print(row(tag, times))
        every = timed(root, args.runs, "train", "check")
        print(row(f"all {len(train.tags)} (4 at a time)", every))

        print("\n`build` (one process per run; each reproduces its tag first, as --all does)\n")
        print("| tags | min s | median s | max s | wheel, size, sha256 the same every run |")
        builds: list[float] = []
        sizes: dict[str, float] = {}
        print("| --- | --- | --- | --- | --- |")
        for tag in train.tags:
            if tag not in buildable:
                entry = train.get(tag)
                print(f"| {tag} | - | - | - | refused: pins {entry.flashinfer if entry else '?'}, not verified |")
                continue
            times, digests, wheel = [], set(), None
            for run in range(per_tag_runs):
                out = tmp / f"dist-{tag}-{run}"
                times += timed(root, 1, "build", "--tag", tag, "--out", str(out))
                (wheel,) = out.glob("*.whl")
                digests.add(hashlib.sha256(wheel.read_bytes()).hexdigest())
            assert wheel is not None
            print(row(tag, times, f"{wheel.name}, {wheel.stat().st_size / 1024:.1f} KiB, {len(digests) == 1}"))
            builds += times
            sizes[tag] = wheel.stat().st_size / 1024
        tags = [a for t in buildable for a in ("--tag", t)]
        name = "--all" if buildable == train.tags else f"{len(buildable)} buildable tags (--all refuses the rest)"
        times, sets = [], set()
        for run in range(args.runs):
            out = tmp / f"dist-all-{run}"
            seconds, proc = release(root, "build", *(["--all"] if buildable == train.tags else tags), "--out", str(out))
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-1500:])
            times.append(seconds)
            sets.add(tuple(sorted((p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in out.glob("*.whl"))))
        per = re.findall(r"vLLM (v\S+)\s+version \S+\s+sha256 \S+\s+\d+ bytes\s+([\d.]+) s", proc.stdout)
        print(row(name, times, f"{len(buildable)} wheels, identical sets every run: {len(sets) == 1}"))
        print("\nlast run, per tag inside one `build` process (backend only, after the reproduction):")
        print("  " + ", ".join(f"{tag} {seconds} s" for tag, seconds in per))
        # The checkout as it stands (its own VERIFIED.toml), for the record.
        seconds, proc = release(REPO, "build", "--all", "--out", str(tmp / "as-it-stands"))
        first = (proc.stderr.strip().splitlines() or ["built"])[0]
        print(f"\n`build --all` on this checkout as it stands: exit {proc.returncode} in {seconds:.2f} s: {first}")
        small, large = min(sizes, key=sizes.__getitem__), max(sizes, key=sizes.__getitem__)
        print("\nthe figures the docs quote (min-max, median in brackets):")
        print(f"  train check, one tag        {span(checks)}")
        print(f"  train check, all {len(train.tags)} tags    {span(every)}")
        print(f"  build, one tag              {span(builds)}")
        print(f"  build {name:<22}{span(times)} ({len(buildable)} wheels)")
        print(f"  wheel size                  {sizes[small]:.1f} KiB ({small}) to {sizes[large]:.1f} KiB ({large})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
