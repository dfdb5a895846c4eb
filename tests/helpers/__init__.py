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

REPO = Path(__file__).resolve().parents[2]


def copy_project(directory: Path) -> Path:
    """A copy of vendor/ and patches/ under `directory`/project that a test may rebase, break and inspect."""
    root = directory / "project"
    root.mkdir()
    for name in ("vendor", "patches"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def run_release(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a real process, pointed at `root`."""
    return subprocess.run(
        [sys.executable, "-m", "release", "--root", str(root), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def snapshot(root: Path) -> dict[str, bytes]:
    """Every byte under vendor/ and patches/, to prove a failed command changed nothing."""
    files = {}
    for top in ("vendor", "patches"):
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                files[str(path.relative_to(root))] = path.read_bytes()
    return files
