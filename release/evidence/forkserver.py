"""Fork servers: one per proving environment and worker, each with torch and vLLM's heavy third-party packages
imported once, forking a clean child per regression test run (release/evidence/child/vllm_fused_moe_evidence_server.py).

A run as a process of its own spends most of its time importing torch, transformers and the rest before
vLLM's own modules (issue 44: 38 such processes for the whole train); a forked child starts with them
imported. What differs between runs is never imported by the server: vLLM's tree (the pristine run puts
the release's first on sys.path) and our wheel (the wheel run adds the wheel's venv with
`site.addsitedir`, so its `.pth` hook is active as in a user's environment). Each run is still hermetic:
the child takes the run's allow-listed environment, working directory and fresh HOME and TMPDIR, under
a guard child that is its subreaper and ends what it leaves.

Servers are started on first use, one per concurrent worker, and kept for the tool's process; they end
when their stdin closes (at exit, or when the tool dies). A server that does not start or answer is
dropped, and the run falls back to a process of its own (release/evidence/runner.py).
`VLLM_FUSED_MOE_EVIDENCE_FORK=0` turns the servers off (benchmarks/evidence.py compares both).

This module starts processes (the servers) and is named in the "processes" import contract for it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

from release.core import log
from release.core.errors import BadInputError
from release.core.parse import load_toml, parse_json
from release.evidence import scratch

SERVER = Path(__file__).with_name("child") / "vllm_fused_moe_evidence_server.py"
ENABLED_VAR = "VLLM_FUSED_MOE_EVIDENCE_FORK"


SERVER_PREFIX = "vllm-fused-moe-forkserver-"


class Server:
    def __init__(self, proc: subprocess.Popen[str], work: Path, lock: int) -> None:
        self.proc, self.work, self.lock = proc, work, lock

    def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """The server's answer to `request`, or None (it died or ran past `timeout`: it is then ended)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        answer: list[str] = []
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError:
            self.end()
            return None
        reader = threading.Thread(target=lambda: answer.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not answer or not answer[0]:
            self.end()
            return None
        try:
            data = parse_json(answer[0], where="the fork server's answer")
        except BadInputError:
            self.end()
            return None
        return data if isinstance(data, dict) else None

    def end(self) -> None:
        with suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with suppress(OSError):
            self.proc.wait(timeout=10)
        shutil.rmtree(self.work, ignore_errors=True)
        with suppress(OSError):
            os.close(self.lock)


_idle: dict[str, list[Server]] = {}
_all: list[Server] = []
_lock = threading.Lock()
_starting: dict[str, threading.Lock] = {}  # per interpreter: held while one of its servers starts


def enabled() -> bool:
    return os.environ.get(ENABLED_VAR, "1") != "0"


def preload(envs_file: Path) -> list[str]:
    try:
        data = load_toml(envs_file)
    except BadInputError:
        return []
    modules = data.get("server", {}).get("preload", [])
    return [m for m in modules if isinstance(m, str) and m.replace(".", "").replace("_", "").isalnum()]


def run(python: str, modules: list[str], env: dict[str, str], request: dict[str, Any], timeout: float) -> Any:
    """One run on a server of `python` (started where none is idle): its answer, or None (run it as a process)."""
    if not enabled():
        return None
    with _lock:
        idle = _idle.setdefault(python, [])
        server = idle.pop() if idle else None
        starting = _starting.setdefault(python, threading.Lock())
    if server is None:
        # One server of an interpreter starts at a time: the first compiles the preloaded modules into the
        # bytecode cache (PYTHONPYCACHEPREFIX), and a second started beside it would compile them all again;
        # after it, a second one reads them. One that became idle meanwhile is taken instead.
        with starting:
            with _lock:
                server = idle.pop() if idle else None
            if server is None:
                server = _start(python, modules, env, timeout)
        if server is None:
            return None
    answer = server.ask(request, timeout)
    if answer is None:
        log.note(f"the fork server of {python} stopped answering; this run goes on as a process of its own")
        return None
    with _lock:
        _idle[python].append(server)
    return answer


def _start(python: str, modules: list[str], env: dict[str, str], timeout: float) -> Server | None:
    base = Path(tempfile.gettempdir())
    scratch.remove_abandoned(base, SERVER_PREFIX)  # a killed tool's servers are gone with it; their dirs are not
    work = Path(tempfile.mkdtemp(prefix=SERVER_PREFIX, dir=base))
    lock = scratch.hold(work)
    own = dict(env)
    for name in ("home", "tmp"):
        (work / name).mkdir()
    own.update(HOME=str(work / "home"), TMPDIR=str(work / "tmp"))
    try:
        proc = subprocess.Popen(
            [python, "-s", str(SERVER), *modules],
            cwd=work,
            env=own,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
        os.close(lock)
        return None
    server = Server(proc, work, lock)
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not ready or '"ready": true' not in ready[0]:
        server.end()
        log.note(f"the fork server of {python} did not start; its runs are processes of their own")
        return None
    with _lock:
        _all.append(server)
    return server


@atexit.register
def _close() -> None:
    for server in _all:
        with suppress(OSError):
            if server.proc.stdin is not None:
                server.proc.stdin.close()  # EOF: the server ends what it started and exits
    for server in _all:
        with suppress(subprocess.TimeoutExpired):
            server.proc.wait(timeout=5)
        server.end()
