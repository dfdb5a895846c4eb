"""The PEP 517 backend that turns a staged package into a wheel: hatchling, pinned, one process per command.

Without isolation (the installed hatchling is the pinned one), every wheel one command builds goes
through one backend process (`Backend`): it runs release/overlay/backend_worker.py, which takes one
staged package a line on stdin, calls the backend's `build_wheel` hook in the package's directory
with SOURCE_DATE_EPOCH set, and answers with the wheel's name. That is what PyPA `build
--no-isolation` does per wheel through pyproject_hooks, less the two interpreter start-ups and the
imports each wheel paid for (19 wheels: 38 processes before, 1 now). The worker has the environment
PyPA `build` gave its hook (PYTHONHASHSEED=0, the caller's variables), so the bytes are the same
(tests/overlay/test_backend.py builds one package both ways and compares the sha256).

With isolation, PyPA `build` makes an isolated environment with the pinned hatchling for each wheel,
as before (`run_backend`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import IO

from release.core import log
from release.core.errors import BuildError, ToolMissingError
from release.core.parse import parse_json

# Pinned so that the backend, and so the bytes of the wheel, only change when we say so.
BACKEND = "hatchling"
BACKEND_VERSION = "1.33.0"
BACKEND_MODULE = "hatchling.build"
WORKER = Path(__file__).with_name("backend_worker.py")


class Isolation(StrEnum):
    """`build --isolation`: whether PyPA `build` makes an isolated environment for the backend."""

    AUTO = "auto"  # isolated unless the installed backend is the pinned version
    ON = "on"
    OFF = "off"


def use_isolation(isolation: Isolation) -> bool:
    if isolation is not Isolation.AUTO:
        return isolation is Isolation.ON
    # Without isolation the installed backend is used; only the pinned one gives the pinned bytes.
    return installed_backend() != BACKEND_VERSION


def installed_backend() -> str | None:
    try:
        return metadata.version(BACKEND)
    except metadata.PackageNotFoundError:
        return None


def backend_environment(epoch: int) -> dict[str, str]:
    """What the backend runs under: the caller's environment, the build's time, and a fixed hash seed."""
    return {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "PYTHONHASHSEED": "0"}


def run_backend(stage: Path, outdir: Path, epoch: int, isolated: bool) -> Path:
    """One wheel by PyPA `build` in its own process (and, isolated, its own environment)."""
    try:
        metadata.version("build")
    except metadata.PackageNotFoundError:
        raise ToolMissingError("PyPA `build` is not installed in this environment") from None
    argv = [sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir)]
    if not isolated:
        argv.append("--no-isolation")
    argv.append(str(stage))
    proc = subprocess.run(argv, capture_output=True, text=True, env=backend_environment(epoch), check=False)
    if proc.returncode != 0:
        log.error((proc.stdout[-3000:] + proc.stderr[-3000:]).rstrip("\n"))
        raise BuildError(f"`{' '.join(argv)}` failed (exit {proc.returncode})")
    return one_wheel(outdir)


def one_wheel(outdir: Path) -> Path:
    wheels = sorted(outdir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"the backend left {len(wheels)} wheels in {outdir}, expected one")
    return wheels[0]


class Backend:
    """The backend for every wheel of one command: one worker process without isolation, PyPA `build` with it.

    Use as a context manager; the worker starts at the first wheel and ends with the block. `epoch` (the
    wheels' SOURCE_DATE_EPOCH) is one value for the whole command, as the worker's environment is.
    """

    def __init__(self, isolated: bool, epoch: int) -> None:
        self.isolated = isolated
        self.epoch = epoch
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: IO[bytes] | None = None

    def __enter__(self) -> Backend:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def build(self, stage: Path, outdir: Path) -> Path:
        """The wheel of the package staged in `stage`, written into `outdir` (made here)."""
        if self.isolated:
            return run_backend(stage, outdir, self.epoch, True)
        outdir.mkdir(parents=True, exist_ok=True)
        proc = self._worker()
        assert proc.stdin is not None and proc.stdout is not None
        request = {"backend": BACKEND_MODULE, "stage": str(stage.resolve()), "out": str(outdir.resolve())}
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            answer = proc.stdout.readline()
        except OSError:
            answer = ""
        said = {"error": f"the worker ended ({answer!r})"}
        reply = parse_json(answer, where=f"{BACKEND}'s worker", error=BuildError) if answer.startswith("{") else said
        if "wheel" not in reply:
            log.error((str(reply.get("error", "")) + self._said()).rstrip("\n")[-6000:])
            raise BuildError(f"{BACKEND} could not build the wheel staged in {stage}")
        return one_wheel(outdir)

    def _worker(self) -> subprocess.Popen[str]:
        if self._proc is not None:
            return self._proc
        found = installed_backend()
        if found != BACKEND_VERSION:
            # What PyPA `build --no-isolation` refused: a backend other than the pinned one makes other bytes.
            raise BuildError(
                f"{BACKEND} {found or '(not installed)'} is installed, the build needs {BACKEND}=={BACKEND_VERSION}",
                hint=f"`python -m release build --isolation auto`, or `pip install {BACKEND}=={BACKEND_VERSION}`",
            )
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (kept open for the worker's life; closed by close())
        # -P: nothing of the working directory on sys.path; the worker is a file of ours, run by path.
        argv = [sys.executable, "-P", str(WORKER)]
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=backend_environment(self.epoch),
        )
        return self._proc

    def _said(self) -> str:
        """What the worker wrote on stderr so far (the backend's own messages)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return "\n" + self._stderr.read()[-3000:].decode("utf-8", "replace")

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.close()
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            finally:  # the answers' pipe too: left to the garbage collector it is a ResourceWarning
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
