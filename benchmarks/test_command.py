"""Wall time of the README's test command (`nox -s lint test`) from a fresh clone, phase by phase.

Not a test: clones this repository's HEAD into a temp directory (no `.nox/`, as CI starts), runs
the README's two commands there (the first rebases onto v0.21.0, as CI's tree is; `--no-first`
leaves it out) and prints what each phase took: every nox session, the `test` session's set-up and
pytest, and the summed test durations of each tier (pytest's `--durations=0`, through
PYTEST_ADDOPTS; with -n the tiers overlap, so their sum exceeds the wall time). `--cold` gives the
run empty caches (wheel cache, uv, pip, XDG) in the temp directory; by default it uses the
machine's caches, as a warm CI runner does. The load (`os.getloadavg`) before and after is
printed with the figures.

    python3 benchmarks/test_command.py [--cold] [--no-first] [--keep]

It takes as long as the command: about 15 minutes warm on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SETUP = 'python3 -m pip install --quiet "pip>=25.1" && python3 -m pip install --quiet --group nox && '
FIRST = SETUP + "python3 -m nox -s rebase -- v0.21.0 --from pypi"
SECOND = SETUP + "python3 -m nox -s lint test"
SESSION_START = re.compile(r"^nox > Running session (\S+)")
SESSION_END = re.compile(r"^nox > Session (\S+) (?:was successful|failed|raised|aborted)")
PYTEST_START = re.compile(r"^nox > python -m pytest ")
DURATION = re.compile(r"^\s*(\d+\.\d+)s (setup|call|teardown)\s+(tests/[^/\s]+)/")
SUMMARY = re.compile(r"^=+ (.*\d+ passed.*) in ([\d.]+)s")


def run(command: str, cwd: Path, env: dict[str, str], log: Path) -> tuple[float, list[tuple[float, str]]]:
    """Runs `command` in a shell; returns its wall time and every output line with when it came."""
    lines: list[tuple[float, str]] = []
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            ["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line.rstrip("\n")))
            out.write(line)
        code = proc.wait()
    if code != 0:
        sys.exit(f"`{command}` failed with exit {code}: see {log}")
    return time.monotonic() - start, lines


def phases(lines: list[tuple[float, str]]) -> list[tuple[str, float]]:
    """(phase, seconds) for every nox session, and the `test` session's set-up and pytest apart."""
    found: list[tuple[str, float]] = []
    started: dict[str, float] = {}
    pytest_at: dict[str, float] = {}
    for at, line in lines:
        if m := SESSION_START.match(line):
            started[m[1]] = at
        elif PYTEST_START.match(line) and started:
            pytest_at[next(reversed(started))] = at
        elif (m := SESSION_END.match(line)) and m[1] in started:
            name, begun = m[1], started.pop(m[1])
            if name in pytest_at:
                found.append((f"{name}: set-up", pytest_at[name] - begun))
                found.append((f"{name}: pytest", at - pytest_at.pop(name)))
            found.append((name, at - begun))
    return found


def tiers(lines: list[tuple[float, str]]) -> dict[str, dict[str, float]]:
    """Per session, the summed test durations (set-up, call, teardown) of each tests/ folder."""
    found: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    session = ""
    for _, line in lines:
        if m := SESSION_START.match(line):
            session = m[1]
        elif m := DURATION.match(line):
            found[session][m[3]] += float(m[1])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", action="store_true", help="empty caches in the temp directory")
    parser.add_argument("--no-first", action="store_true", help="leave the README's first command (the rebase) out")
    parser.add_argument("--keep", action="store_true", help="keep the clone and its logs")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="test-command-"))
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    env = dict(os.environ, CI="true", PYTEST_ADDOPTS="--durations=0")
    if args.cold:
        for name in ("VLLM_FUSED_MOE_CACHE", "UV_CACHE_DIR", "PIP_CACHE_DIR", "XDG_CACHE_HOME"):
            env[name] = str(tmp / "caches" / name.lower())
    load_before = os.getloadavg()
    print(f"{os.cpu_count()} cores, load {load_before[0]:.2f} at the start; clone of {REPO} in {clone}", flush=True)
    rows: list[tuple[str, float]] = []
    if not args.no_first:
        took, _ = run(FIRST, clone, env, tmp / "first.log")
        rows.append(("first command (rebase onto v0.21.0)", took))
    took, lines = run(SECOND, clone, env, tmp / "second.log")
    rows += phases(lines)
    rows.append(("the test command", took))
    load_after = os.getloadavg()

    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.1f} s")
    for _, line in lines:
        if m := SUMMARY.match(line):
            print(f"pytest: {m[1]} in {float(m[2]):.1f} s")
    for session, by_tier in tiers(lines).items():
        summed = "  ".join(f"{tier.removeprefix('tests/')} {took:.0f} s" for tier, took in sorted(by_tier.items()))
        print(f"summed test durations, {session}: {summed}")
    print(f"load (1 min) {load_before[0]:.2f} at the start, {load_after[0]:.2f} at the end")
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
