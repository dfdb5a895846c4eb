"""nox passes the tool's exit code through: docs/maintainers.md documents 2, 3 and 4 per step when run
through nox (`nox -s check`, `nox -s rebase -- ...`), and nox made every failure 1.

A real `nox` process, its session venv in a scratch directory (the tooling group from uv's cache)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO


def test_nox_exits_with_the_tools_own_code(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOX")}
    proc = subprocess.run(
        [sys.executable, "-m", "nox", "--envdir", str(tmp_path / "nox"), "-s", "check", "--", "--no-such-option"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    said = proc.stdout + proc.stderr
    assert "unrecognized arguments: --no-such-option" in said and "exited 2: nox exits with it" in said, said
