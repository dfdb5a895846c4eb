"""`scan` with the lazy wheel reader against scanning whole wheels: wall time and bytes, side by side.

Not a test. The lazy scan runs for real over every release in the range, from an empty cache
(range requests only). Whole wheels are downloaded and scanned for a few releases (`--full`,
spread over the range); the rest of the full-wheel column is extrapolated from each wheel's
size on the index at the throughput measured, plus the per-release work measured.

    python benchmarks/scan.py [--since 0.10.0] [--until NEWEST] [--full 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from packaging.version import Version  # noqa: E402

from release.core.layout import UPSTREAM_SUBTREE, Layout  # noqa: E402
from release.model.lines import load_lines  # noqa: E402
from release.pristine.index import Release, releases  # noqa: E402
from release.pristine.lazy_wheel import Transfer, download  # noqa: E402
from release.pristine.wheel import read_local  # noqa: E402
from release.queue.drift import unapply  # noqa: E402
from release.queue.snapshot import Checkout  # noqa: E402
from release.scan.run import ScanOptions, classify_patches, human_bytes, scan, scan_patches  # noqa: E402


@dataclass
class Full:
    version: str
    size: int
    download_s: float
    rest_s: float


def full_scan_of(release: Release, tmp: Path, layout: Layout) -> Full:
    """Download the whole wheel, read it locally and classify: what a scan without range reads does."""
    assert release.wheel is not None
    queue, patches = scan_patches(Checkout.load(layout))
    lines = load_lines(layout.lines)
    pinned, _ = unapply(layout.vendor_files(), queue.patches)
    target = tmp / release.wheel.filename
    started = time.perf_counter()
    download(release.wheel.url, target, release.wheel.sha256, release.wheel.size, Transfer())
    downloaded = time.perf_counter()
    content = read_local(target, lambda n: any(line.wants(n) for line in lines))
    prefix = UPSTREAM_SUBTREE + "/"
    on_line = any(line.present(content.names) for line in lines)
    files = {n[len(prefix) :]: d for n, d in content.files.items() if n.startswith(prefix)} if on_line else {}
    classify_patches(patches, files, pinned, tmp / "work")
    done = time.perf_counter()
    size = target.stat().st_size
    target.unlink()
    return Full(str(release.version), size, downloaded - started, done - downloaded)


def spread(items: list[Release], count: int) -> list[Release]:
    if count >= len(items):
        return items
    step = (len(items) - 1) / max(count - 1, 1)
    return [items[round(i * step)] for i in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--since", default="0.10.0")
    parser.add_argument("--until", default=None)
    parser.add_argument("--full", type=int, default=3, help="how many releases to download whole (spread out)")
    args = parser.parse_args()
    layout = Layout.default()
    since = Version(args.since.removeprefix("v"))
    until = Version(args.until.removeprefix("v")) if args.until else None
    with tempfile.TemporaryDirectory(prefix="scan-bench-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["VLLM_FUSED_MOE_CACHE"] = str(tmp / "cache")  # cold: nothing cached
        in_range = [r for r in releases() if r.wheel and r.version >= since and (until is None or r.version <= until)]
        started = time.perf_counter()
        lazy = scan(ScanOptions(layout, since, until), Checkout.load(layout))
        lazy_s = time.perf_counter() - started
        fulls = [full_scan_of(r, tmp, layout) for r in spread(in_range, args.full)]

    total_size = sum(r.wheel.size or 0 for r in in_range if r.wheel)
    throughput = sum(f.size for f in fulls) / sum(f.download_s for f in fulls)
    rest = statistics.median(f.rest_s for f in fulls)
    measured = {f.version for f in fulls}
    estimate_s = sum(f.download_s + f.rest_s for f in fulls) + sum(
        (r.wheel.size or 0) / throughput + rest for r in in_range if r.wheel and str(r.version) not in measured
    )
    moved = lazy.transfer
    n = len(in_range)
    ratio = total_size / moved.bytes
    lazy_median = statistics.median(r.seconds for r in lazy.results)
    lazy_bytes = int(statistics.median(r.transfer.bytes for r in lazy.results))
    full_median = statistics.median(f.download_s + f.rest_s for f in fulls)
    full_bytes = int(statistics.median(r.wheel.size or 0 for r in in_range if r.wheel))
    measured_text = ", ".join(
        f"{f.version} {human_bytes(f.size)} in {f.download_s:.1f} s + {f.rest_s:.1f} s" for f in fulls
    )
    rows = [
        f"scan of {n} vLLM releases, {in_range[0].version} to {in_range[-1].version}",
        f"| | lazy wheel reader (measured) | whole wheels (measured on {len(fulls)}, extrapolated) | ratio |",
        "| --- | --- | --- | --- |",
        f"| bytes downloaded | {human_bytes(moved.bytes)} | {human_bytes(total_size)} | {ratio:.0f}x |",
        f"| HTTP requests | {moved.requests} | {n} | |",
        f"| wall time | {lazy_s:.1f} s | {estimate_s:.0f} s | {estimate_s / lazy_s:.0f}x |",
        f"| per release (median) | {lazy_median:.2f} s, {human_bytes(lazy_bytes)} "
        f"| {full_median:.1f} s, {human_bytes(full_bytes)} | |",
        "",
        f"whole wheels measured: {measured_text}; {throughput / 1e6:.0f} MB/s",
    ]
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
