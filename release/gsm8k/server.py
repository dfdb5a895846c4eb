"""Start a model server as a real subprocess, wait for /health, and always stop it.

The lifecycle takes any argv, so tests drive it with a test double of the model server;
`build_vllm_serve_argv` is the one place the real `vllm serve` command line is built.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from release.core.errors import HealthTimeoutError, ServerCrashedError, ServerStartError

# The FlashInfer all-to-all backends: the NVLink pair is what vLLM 0.18.0+ calls them;
# `flashinfer_all2allv` is the one name of 0.11.1-0.17.1 and an alias of two-sided from 0.18.0
# (patches/lines.toml says which line has which; tests/gsm8k/test_serve_flags.py checks them).
BACKENDS: tuple[str, ...] = ("flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided", "flashinfer_all2allv")
# The serving flags of the upstream report (vllm PR #41382's test plan) besides the
# parallelism and backend ones, which build_vllm_serve_argv adds itself.
UPSTREAM_REPORT_SERVE_ARGS: tuple[str, ...] = (
    "--async-scheduling",
    "--kv-cache-dtype",
    "auto",
    "--trust-remote-code",
    "--no-enable-prefix-caching",
    "--max-num-seqs",
    "64",
)
LOG_TAIL_LINES = 40


def build_vllm_serve_argv(
    vllm_executable: str | Path,
    model: str,
    backend: str,
    *,
    tensor_parallel_size: int,
    data_parallel_size: int,
    port: int,
    host: str = "127.0.0.1",
    enable_expert_parallel: bool = True,
    extra_args: Sequence[str] = UPSTREAM_REPORT_SERVE_ARGS,
) -> list[str]:
    if backend not in BACKENDS:
        raise ValueError(f"unknown all2all backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    argv = [
        str(vllm_executable),
        "serve",
        model,
        "--host",
        host,
        "--port",
        str(port),
        "--tensor-parallel-size",
        str(tensor_parallel_size),
        "--data-parallel-size",
        str(data_parallel_size),
    ]
    if enable_expert_parallel:
        argv.append("--enable-expert-parallel")
    argv += ["--all2all-backend", backend, *extra_args]
    return argv


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "(no log written)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(log is empty)"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ManagedServer:
    """One server process in its own process group (vLLM forks engine and worker processes).

    Use as a context manager: the group is stopped on every exit path, Ctrl-C included.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        base_url: str,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        health_timeout_s: float = 1800.0,
        poll_interval_s: float = 1.0,
        stop_grace_s: float = 30.0,
    ) -> None:
        self.argv = list(argv)
        self.base_url = base_url.rstrip("/")
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.health_timeout_s = health_timeout_s
        self.poll_interval_s = poll_interval_s
        self.stop_grace_s = stop_grace_s
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            # start_new_session: the server and everything it forks share one process
            # group we can signal as a whole, and a Ctrl-C in our terminal reaches only us,
            # so shutdown happens in our order (SIGTERM, grace, SIGKILL).
            self._process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )

    def _require_process(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("server not started")
        return self._process

    def is_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/health", timeout=5) as response:
                status: int = response.status
                return 200 <= status < 300
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def wait_healthy(self) -> float:
        """Seconds it took; raises if the process exits or the timeout passes first."""
        process = self._require_process()
        started = time.monotonic()
        deadline = started + self.health_timeout_s
        while True:
            code = process.poll()
            if code is not None:
                raise ServerStartError(
                    f"server exited with code {code} before /health answered; log tail:\n{log_tail(self.log_path)}"
                )
            if self.is_healthy():
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                raise HealthTimeoutError(
                    f"server did not answer {self.base_url}/health within {self.health_timeout_s:g} s; "
                    f"log tail:\n{log_tail(self.log_path)}"
                )
            time.sleep(self.poll_interval_s)

    def check_alive(self) -> None:
        code = self._require_process().poll()
        if code is not None:
            raise ServerCrashedError(
                f"server exited with code {code} while the evaluation ran; log tail:\n{log_tail(self.log_path)}"
            )

    def stop(self) -> int | None:
        """Stop the whole process group; returns the leader's exit code (None if never started)."""
        process = self._process
        if process is None:
            return None
        pgid = process.pid  # == the group id, because of start_new_session
        if _group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=self.stop_grace_s)
        # The leader may be gone while forked workers linger in the group: kill the rest.
        deadline = time.monotonic() + self.stop_grace_s
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        return process.wait()

    def __enter__(self) -> ManagedServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
