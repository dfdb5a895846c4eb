"""What several test files of one run share across pytest-xdist's workers: a directory made once.

A session fixture is made once per worker that asks for it; the workers are separate processes.
Where two files on different workers need the same expensive, read-only artefact (every train
tag's wheel), the first to ask makes it under a file lock in the run's own temp directory, and
every later asker, on any worker, reads it from there. The run's temp directory goes with the run
(tmp_path_retention_policy), so nothing outlives it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def run_temp(factory: pytest.TempPathFactory) -> Path:
    """The run's temp directory: the parent of a worker's own (popen-gwN) under xdist, else the session's."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(run: Path, name: str, make: Callable[[Path], None]) -> Path:
    """The directory `name` under `run` (the run's temp directory, `run_temp`), which `make` fills the
    first time any worker asks for it.

    `make` writes into a fresh directory beside it, renamed into place when it returns: a failure
    leaves nothing that a later asker would take for done, and that asker makes it again.
    """
    shared = run / "made-once"
    shared.mkdir(exist_ok=True)
    done = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not done.is_dir():
            partial = shared / f".{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            make(partial)
            partial.rename(done)
    return done
