"""Wall time of the proof of the whole train, as `publish` makes it: each wheel built again at its commit and
compared (release/overlay/rebuild.py), then each bug's test on every train tag three times: pristine, with its
wheel, and with its wheel built without the bug's patch (release/overlay/without.py); each run forked from a
fork server (release/evidence/forkserver.py) beside the baseline of one process per run, measured side by side
in one run of this script.

Not a test. Builds one wheel per train tag (`build --all --allow-dirty`, timed apart), then, for each way of
running (`process`: VLLM_FUSED_MOE_EVIDENCE_FORK=0, then `fork`), proves all of them (release/overlay/publish.py
`prove`) twice, each way with its own cache directory whose release wheels and proving environments are linked
from the user's cache (so nothing is downloaded or made twice) but whose evidence, rebuilt digests, wheels
without a fix and compiled modules start empty:

- cold: nothing cached, no compiled vLLM modules (every run imports torch and vLLM from source);
- warm: the same wheels again, every rebuild, wheel without a fix and run read back from the cache.

The runs are three per bug (pristine, wheel, the wheel without the bug's fix). Run it with the tooling's
interpreter:
`python benchmarks/evidence.py [--workers N]` (the proving environments are the tool's). It prints the
load average before and after each figure, since the machine's other work slows the cold runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from contextlib import ExitStack  # noqa: E402

from release.core.layout import Layout  # noqa: E402
from release.evidence.gather import refuse  # noqa: E402
from release.overlay.publish import PublishOptions, prove  # noqa: E402
from release.overlay.wheel import read_wheel  # noqa: E402
from release.pristine.wheel import cache_dir  # noqa: E402
from release.queue.snapshot import Checkout  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="wheels at a time")
    parser.add_argument("--dist", type=Path, help="wheels already built (default: build --all into a temp dir)")
    parser.add_argument(
        "--modes",
        default="process,fork",
        help="the ways of running to measure, in order (default: process,fork; the baseline beside the new figure)",
    )
    args = parser.parse_args()
    layout = Layout(REPO)
    wheels_cache = cache_dir()
    with tempfile.TemporaryDirectory(prefix="evidence-bench-") as tmp:
        dist = args.dist or Path(tmp) / "dist"
        if args.dist is None:
            start = time.perf_counter()
            built = subprocess.run(
                [sys.executable, "-m", "release", "build", "--all", "--allow-dirty", "--out", str(dist)],
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            if built.returncode != 0:
                print(built.stderr, file=sys.stderr)
                return 1
            print(f"build --all: {time.perf_counter() - start:.1f} s")
        wheels = [read_wheel(path) for path in sorted(dist.glob("*.whl"))]
        for mode in args.modes.split(","):
            cache = Path(tmp) / f"cache-{mode}"
            (cache / "wheels").mkdir(parents=True)
            for version in wheels_cache.iterdir():
                if version.is_dir():
                    (cache / "wheels" / version.name).symlink_to(version, target_is_directory=True)
            if (wheels_cache.parent / "envs").is_dir():
                (cache / "envs").symlink_to(wheels_cache.parent / "envs", target_is_directory=True)
            os.environ["VLLM_FUSED_MOE_CACHE"] = str(cache)
            os.environ["VLLM_FUSED_MOE_EVIDENCE_FORK"] = "1" if mode == "fork" else "0"
            os.environ.pop("PYTHONPYCACHEPREFIX", None)
            for label in ("cold", "warm"):
                before = load()
                start = time.perf_counter()
                options = PublishOptions(dist, Path(tmp) / "index", None, allow_dirty=True)
                with ExitStack() as stack:
                    proofs = prove(Checkout.load(layout), wheels, options, [], stack, args.workers)
                seconds = time.perf_counter() - start
                refused = []
                for evidence in proofs:
                    try:
                        refuse(evidence, evidence.wheel)
                    except Exception as exc:  # a refusal is a result here, not a failure of the benchmark
                        refused.append(str(exc).splitlines()[0])
                runs = sum(len(e.bugs) for e in proofs)
                print(
                    f"{mode} {label}: {len(wheels)} wheels, {runs} bugs x 3 runs, {seconds:.1f} s "
                    f"({args.workers} at a time; load {before} -> {load()}); refused: {len(refused)}",
                    flush=True,
                )
                for line in refused:
                    print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
