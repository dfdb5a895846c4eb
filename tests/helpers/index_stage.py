"""The index stage of `publish` (release/overlay/index.py `publish`) in a process of its own.

`publish` runs it after its gates (check's, the rebuild of each wheel, the evidence); a test of what the index
does under a kill or a held lock gives it small demo wheels (helpers.synthetic.demo_wheel), which the command
itself refuses as no build of the checkout (tests/cli/test_publish_rebuild.py). The process prints what the
command prints of it (its repairs, as `note:` lines) and an error as the command's one line, with its exit code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO

SCRIPT = """
import sys
from pathlib import Path
from release.core.errors import ReleaseError
from release.overlay.build import PROJECT
from release.overlay.index import publish
try:
    outcome = publish([Path(sys.argv[1])], Path(sys.argv[2]), project=PROJECT)
except ReleaseError as exc:
    print(f"error[{exc.reference}]: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)
for line in outcome.repaired:
    print(f"note: {line}", file=sys.stderr)
"""


def publish_index(wheel: Path, index: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`wheel` into the index at `index` by the index stage alone, in a process (FAULT_ENV, the lock wait apply)."""
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(wheel), str(index)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
