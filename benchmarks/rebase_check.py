"""Wall time of a rebase from a cached release wheel and of `check`, side by side.

Not a test: prints medians over several runs in one process tree, each command a
real `python -m release` process on a throw-away copy of the project.

    python benchmarks/rebase_check.py [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUDGET_S = 5.0


def timed(args: list[str], root: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "release", "--root", str(root), *args], cwd=REPO, check=True, capture_output=True
    )
    return time.perf_counter() - start


def fresh_copy(tmp: Path) -> Path:
    root = tmp / f"p{time.monotonic_ns()}"
    for name in ("vendor", "patches"):
        shutil.copytree(REPO / name, root / name)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # Warm the wheel cache first so the figures are the cached path, as the issue asks.
        timed(["rebase", "v0.21.0", "--from", "pypi", "--dry-run", "--report", str(tmp / "warm")], fresh_copy(tmp))
        rows = {
            "rebase v0.20.0 -> v0.21.0 (cached wheel)": [
                timed(["rebase", "v0.21.0", "--from", "pypi", "--report", str(tmp / "r")], fresh_copy(tmp))
                for _ in range(args.runs)
            ],
            "rebase v0.20.0 -> v0.34.0 (cached wheel)": [
                timed(["rebase", "v0.34.0", "--from", "pypi", "--report", str(tmp / "r")], fresh_copy(tmp))
                for _ in range(args.runs)
            ],
            "check": [timed(["check"], fresh_copy(tmp)) for _ in range(args.runs)],
            "status": [timed(["status"], fresh_copy(tmp)) for _ in range(args.runs)],
        }
    print(f"| command | min s | median s | max s | median / {BUDGET_S:.0f} s budget |")
    print("| --- | --- | --- | --- | --- |")
    for name, values in rows.items():
        median = statistics.median(values)
        print(f"| {name} | {min(values):.2f} | {median:.2f} | {max(values):.2f} | {median / BUDGET_S:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
