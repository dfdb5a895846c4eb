"""What the suites share: a throw-away copy of the project, the real CLI in a process, snapshots.

Importable as `helpers` from every test (pytest's `pythonpath` in pyproject.toml lists tests/);
freshvenv (venvs over the test environment) and gsm8k (the GSM8K data and model-server test
double) sit beside this module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# The checkout under test: every test module takes it from here. tests/kernel's scripts and
# tests/contract/moe_contract/ find it themselves: they also run outside pytest (on a GPU box, in
# a contract rank's interpreter), where `helpers` is not importable.
REPO = Path(__file__).resolve().parents[2]
# The checkout whose own queue (patches/, vendor/, the train) the rule tests (marker `rules`) hold to the
# tool's rules, whatever it holds: this one, or the copy VLLM_FUSED_MOE_RULES_CHECKOUT names
# (tests/e2e/test_pq.py runs them so on a copy after the documented "Add a patch"). A behaviour test
# never reads it: it builds its own queue (copy_project, helpers/synthetic.py).
CHECKOUT = Path(os.environ.get("VLLM_FUSED_MOE_RULES_CHECKOUT") or REPO).resolve()

# What a loaded shared 2-core machine may add to one wall-clock measurement (a process scheduled late, a
# server thread starved): a time bound is the behaviour's own budget plus this, and must stay far below what
# the broken behaviour takes (a stall held until the test's timeout, a 40 s drip per attempt), so it still fails
# then. Budgets with a margin of 1-1.5 s failed under load.
LOADED_MACHINE_S = 10.0


def copy_project(directory: Path) -> Path:
    """A copy of vendor/, patches/, our runtime code and envs/ (each line's proving environment) under
    `directory`/project that a test may rebase, break, build, publish and inspect."""
    root = directory / "project"
    root.mkdir()
    for name in ("vendor", "patches", "release/overlay/runtime", "envs"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def run_release(
    root: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI in a real process, pointed at `root`; started in `cwd` (`-C`), where relative paths are read."""
    where = ["-C", str(cwd)] if cwd is not None else []
    return subprocess.run(
        [sys.executable, "-m", "release", *where, "--root", str(root), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def private_cache(tmp_path: Path) -> dict[str, str]:
    """The environment for a CLI run that may download: the user's cached releases are linked in and
    read where they are, while a new version directory (even a failed download's) lands under tmp_path."""
    from release.pristine.wheel import cache_dir

    wheels = tmp_path / "cache" / "wheels"  # cache_dir() is $VLLM_FUSED_MOE_CACHE/wheels
    wheels.mkdir(parents=True)
    if cache_dir().is_dir():
        for version in cache_dir().iterdir():
            if version.is_dir():
                (wheels / version.name).symlink_to(version, target_is_directory=True)
    return {"VLLM_FUSED_MOE_CACHE": str(wheels.parent)}


def disk_usage(path: Path) -> int:
    """Bytes allocated under `path`, each file once (uv hard-links its cache into venvs)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def snapshot(root: Path) -> dict[str, bytes]:
    """Every byte under vendor/ and patches/, to prove a failed command changed nothing."""
    files = {}
    for top in ("vendor", "patches"):
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                files[str(path.relative_to(root))] = path.read_bytes()
    return files


def work_leftovers(root: Path) -> list[str]:
    """What .work/ holds besides the repository lock (release.core.lock), which stays by design."""
    work = root / ".work"
    return sorted(p.name for p in work.iterdir() if not p.name.startswith("repo.lock")) if work.is_dir() else []


def alive(pid: int) -> bool:
    """Is process `pid` running? A zombie is dead, waiting for its parent (init) to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
