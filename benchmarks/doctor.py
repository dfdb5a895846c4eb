"""Benchmark `vllm-fused-moe doctor` (printed, never asserted): what it costs without and with --live.

    python benchmarks/doctor.py [--runs 5]

Two fresh venvs with the pinned vLLM release (tests/helpers/freshvenv.py: torch and vLLM's import
deps come from the test environment): one with our wheel, one without. Wall times are medians of
--runs after one warm-up run (bytecode compiled), each a real process:
- doctor without --live, installed (`vllm-fused-moe doctor --json`) and from outside
  (`python -m release doctor --python ...`), against `python -c pass` in the same venv;
- doctor --live against vLLM's own import of the module that resolves the classes
  (`python -c "import vllm.model_executor.layers.fused_moe.all2all_utils"`), in the same venv.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# A benchmark runs as a script: the repository (release/) and tests/ (the helpers package) on the path.
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.doctor import scan_file  # noqa: E402
from helpers.freshvenv import create  # noqa: E402
from release.core.layout import Layout  # noqa: E402
from release.model.pin import Pin  # noqa: E402
from release.overlay.build import build  # noqa: E402
from release.overlay.index import publish  # noqa: E402
from release.overlay.target import BuildPlan  # noqa: E402
from release.pristine.wheel import pypi_wheel  # noqa: E402

ALL2ALL = "import vllm.model_executor.layers.fused_moe.all2all_utils"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VLLM_FUSED_MOE")}


def _wall(argv: list[str], runs: int) -> tuple[float, subprocess.CompletedProcess[str]]:
    subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=ROOT)  # warm-up: bytecode, page cache
    times, proc = [], None
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=ROOT)
        times.append(time.perf_counter() - started)
    assert proc is not None
    return statistics.median(times), proc


def _paired(plain: list[str], doctor: list[str], runs: int) -> tuple[float, float, float, dict[str, Any]]:
    """Alternate the two commands so that a busy machine slows both alike; medians and the median difference."""
    for argv in (plain, doctor):
        subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=ROOT)
    a: list[float] = []
    b: list[float] = []
    report: dict[str, Any] = {}
    for _ in range(runs):
        for argv, into in ((plain, a), (doctor, b)):
            started = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=ROOT)
            into.append(time.perf_counter() - started)
            if argv is doctor:
                report = json.loads(proc.stdout)
    diff = statistics.median(y - x for x, y in zip(a, b, strict=True))
    return statistics.median(a), statistics.median(b), diff, report


def _importtime(python: str, *args: str) -> tuple[int, int, bool]:
    """(microseconds for importing vllm_fused_moe.doctor, modules imported in all, torch/vLLM among them)."""
    proc = subprocess.run([python, "-X", "importtime", *args], capture_output=True, text=True, env=_env(), cwd=ROOT)
    names, doctor_us = [], 0
    for line in proc.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)\s*$", line)
        if match:
            names.append(match.group(3).strip())
            if match.group(3).strip() == "vllm_fused_moe.doctor":
                doctor_us = int(match.group(1))
    return doctor_us, len(names), any(n.split(".")[0] in ("torch", "vllm") for n in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    pinned = Pin.load(Layout.default().upstream_toml).version
    with tempfile.TemporaryDirectory(prefix="doctor-bench-") as scratch:
        tmp = Path(scratch)
        project = tmp / "project"
        for name in ("vendor", "patches", "release/overlay/runtime"):
            shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
        shipped = Layout(project).affected_json
        if not shipped.is_file():
            shutil.copyfile(scan_file(), shipped)
        wheel = build(BuildPlan(Layout(project), tmp / "dist")).wheel
        publish([wheel, pypi_wheel(f"v{pinned}")], tmp / "index")
        ours = str(create(tmp / "ours", tmp / "index", [f"vllm=={pinned}", "vllm-fused-moe"]))
        bare = str(create(tmp / "bare", tmp / "index", [f"vllm=={pinned}"]))
        script = str(Path(ours).with_name("vllm-fused-moe"))
        outside = [sys.executable, "-m", "release", "doctor", "--python", bare, "--json", "--scan", str(scan_file())]

        rows = []
        start, _ = _wall([ours, "-c", "pass"], args.runs)
        rows.append(("python -c pass (venv with our .pth)", start, ""))
        plain, proc = _wall([script, "doctor", "--json"], args.runs)
        rows.append(("vllm-fused-moe doctor", plain, json.loads(proc.stdout)["verdict"]))
        far, proc = _wall(outside, args.runs)
        rows.append(("release doctor --python (bare venv)", far, json.loads(proc.stdout)["verdict"]))
        own, live, extra, report = _paired([ours, "-c", ALL2ALL], [script, "doctor", "--json", "--live"], args.runs)
        rows.append(("vLLM's own import of all2all_utils (ours)", own, ""))
        note = f"{report['verdict']}, live import {report['live']['seconds']} s; doctor - import {extra:+.3f} s"
        rows.append(("vllm-fused-moe doctor --live", live, note))
        own_bare, live_bare, extra_bare, report = _paired([bare, "-c", ALL2ALL], [*outside, "--live"], args.runs)
        rows.append(("vLLM's own import of all2all_utils (bare)", own_bare, ""))
        note = f"{report['verdict']}; doctor - import {extra_bare:+.3f} s"
        rows.append(("release doctor --python --live (bare)", live_bare, note))
        doctor_us, modules, heavy = _importtime(ours, "-m", "vllm_fused_moe", "doctor", "--json")

    load = os.getloadavg()[0]
    print(f"vLLM {pinned}, {os.cpu_count()} cores, load {load:.1f}, median of {args.runs} runs after a warm-up")
    for label, seconds, note in rows:
        print(f"  {label:<44} {seconds:7.3f} s  {note}")
    print(
        f"  import of vllm_fused_moe.doctor: {doctor_us / 1000:.1f} ms; {modules} modules imported in all by "
        f"`python -m vllm_fused_moe doctor`; torch or vLLM among them: {heavy}"
    )


if __name__ == "__main__":
    main()
