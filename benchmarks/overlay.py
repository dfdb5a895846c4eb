"""Benchmark the overlay (printed, never asserted): wheel size and build time against the vLLM
wheel we would otherwise fork, and the import-time cost of activation against a plain
`import vllm` measured in the same run.

    python benchmarks/overlay.py [--runs 5]

Needs the test environment (tests/helpers/freshvenv.py: torch and vLLM's import deps come from it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A script, never imported: the checkout's `release` and the tests' helpers, as pytest's pythonpath has them.
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.freshvenv import create, site_packages  # noqa: E402
from release.core.layout import Layout  # noqa: E402
from release.overlay.build import build  # noqa: E402
from release.overlay.index import publish  # noqa: E402
from release.overlay.project import PTH_NAME  # noqa: E402
from release.overlay.target import BuildPlan  # noqa: E402
from release.pristine.wheel import pypi_wheel  # noqa: E402

# One process: plain `import vllm`, then the import that makes vLLM load the subtree (where the
# hook decides and serves files), then the hook's own pieces timed directly.
TIMING = r"""
import json, sys, time
t0 = time.perf_counter(); import vllm; t1 = time.perf_counter()
from vllm.model_executor.layers.fused_moe import all2all_utils
t2 = time.perf_counter()
out = {"import_vllm": t1 - t0, "import_fused_moe": t2 - t1}
if "vllm_fused_moe._finder" in sys.modules:
    import logging
    from vllm_fused_moe import _activate
    logging.getLogger(_activate.LOGGER_NAME).disabled = True
    n = 20; t = time.perf_counter()
    for _ in range(n): _activate.decide()
    out["decide"] = (time.perf_counter() - t) / n
    finder = sys.modules["vllm_fused_moe._finder"].installed_finder()
    n = 100000; t = time.perf_counter()
    for _ in range(n): finder.find_spec("some.other.module")
    out["find_spec_miss"] = (time.perf_counter() - t) / n
    out["imports_seen"] = len(sys.modules)
print(json.dumps(out))
"""


def _env() -> dict[str, str]:
    # Bytecode caches on, as after a normal `pip install`, so we time imports, not compiles.
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VLLM_FUSED_MOE")}


def _time_once(python: Path) -> dict:
    proc = subprocess.run([str(python), "-c", TIMING], capture_output=True, text=True, check=True, env=_env())
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _startup(python: Path, runs: int) -> float:
    samples = []
    for _ in range(runs):
        proc = subprocess.run(
            [str(python), "-X", "importtime", "-c", "pass"], capture_output=True, text=True, check=True, env=_env()
        )
        # "import time: self [us] | cumulative | name": our modules' own time (the .pth's module, the
        # package, the finder), summed.
        samples.append(
            sum(
                int(line.split("|")[0].split(":")[1])
                for line in proc.stderr.splitlines()
                if line.count("|") == 2 and line.split("|")[2].strip().lstrip("_").startswith("vllm_fused_moe")
            )
            / 1e6
        )
    return statistics.median(samples)


# What site.py does with our .pth at start-up, timed alone: read the file and run its line (compiling
# it, importing what it imports, installing the finder). The .pth is set aside while this runs, so
# that site itself does not run it first.
PTH_TIMING = (
    "import site, sys, time; t = time.perf_counter(); site.addpackage(sys.argv[1], sys.argv[2], set()); "
    "print(time.perf_counter() - t)"
)


def _pth_line(python: Path, pth: Path, runs: int, mode: str | None = None) -> float:
    env = _env() | ({"VLLM_FUSED_MOE": mode} if mode else {})
    argv = [str(python), "-c", PTH_TIMING, str(pth.parent), pth.name]
    subprocess.run(argv, capture_output=True, check=True, env=env)  # bytecode caches written
    samples = [
        float(subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout) for _ in range(runs)
    ]
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    layout = Layout.default()
    vllm_wheel = pypi_wheel("v0.20.0")
    with tempfile.TemporaryDirectory(prefix="overlay-bench-") as scratch:
        root = Path(scratch)
        builds = [build(BuildPlan(layout, root / f"dist{i}")) for i in range(3)]
        wheel = builds[0]
        print(
            f"overlay wheel   {wheel.wheel.name}: {wheel.size / 1024:.1f} KiB, build "
            f"{statistics.median(b.seconds for b in builds):.2f} s (median of 3, "
            f"{'isolated' if wheel.isolated else 'no isolation'}), reproducible: "
            f"{len({b.sha256 for b in builds}) == 1}"
        )
        size = vllm_wheel.stat().st_size
        print(
            f"vLLM wheel      {vllm_wheel.name}: {size / 2**20:.1f} MiB -> the overlay is "
            f"{wheel.size / size * 100:.4f} % of it ({size / wheel.size:,.0f}x smaller)"
        )
        publish([wheel.wheel, vllm_wheel], root / "index")
        python = create(root / "venv", root / "index", ["vllm==0.20.0", "vllm-fused-moe"])
        pth = site_packages(python) / PTH_NAME
        _time_once(python)  # warm the bytecode caches of both the overlay and upstream
        pth.rename(pth.with_suffix(".off"))
        _time_once(python)
        pth.with_suffix(".off").rename(pth)
        hooked, plain = [], []
        for _ in range(args.runs):  # interleaved, so drift hits both alike
            hooked.append(_time_once(python))
            pth.rename(pth.with_suffix(".off"))
            plain.append(_time_once(python))
            pth.with_suffix(".off").rename(pth)
        startup = _startup(python, args.runs)
        pth.rename(pth.with_suffix(".off"))
        pth_on = _pth_line(python, pth.with_suffix(".off"), max(args.runs, 20))
        pth_off = _pth_line(python, pth.with_suffix(".off"), max(args.runs, 20), "off")
        pth.with_suffix(".off").rename(pth)
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    base = med(plain, "import_vllm")
    print(
        f"import vllm     {base:.3f} s plain, {med(hooked, 'import_vllm'):.3f} s with the hook installed "
        f"(median of {args.runs})"
    )
    print(
        f"fused_moe load  {med(plain, 'import_fused_moe'):.3f} s upstream, {med(hooked, 'import_fused_moe'):.3f} s "
        f"served by the overlay"
    )
    print(
        f"start-up        the .pth line {pth_on * 1e3:.2f} ms ({pth_off * 1e3:.2f} ms with VLLM_FUSED_MOE=off; "
        f"median of {max(args.runs, 20)}), of which our modules' import {startup * 1e3:.2f} ms"
    )
    direct = pth_on + med(hooked, "decide") + med(hooked, "find_spec_miss") * med(hooked, "imports_seen")
    print(
        f"hook cost       the .pth line {pth_on * 1e3:.2f} ms + decision {med(hooked, 'decide') * 1e3:.2f} ms + "
        f"{med(hooked, 'find_spec_miss') * 1e9:.0f} ns x {med(hooked, 'imports_seen'):.0f} imports "
        f"= {direct * 1e3:.2f} ms = {direct / base:.4f} x a plain `import vllm`"
    )
    end_to_end = (med(hooked, "import_vllm") + med(hooked, "import_fused_moe")) / (
        med(plain, "import_vllm") + med(plain, "import_fused_moe")
    )
    print(f"end to end      (import vllm + fused_moe) hooked / plain = {end_to_end:.3f} (noise is a few %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
