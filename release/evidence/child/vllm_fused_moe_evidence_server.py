"""A fork server for one proving environment: torch and vLLM's heavy third-party packages imported once, a
clean child forked per regression test run.

`PYTHON vllm_fused_moe_evidence_server.py MODULE...`, started by release/evidence/forkserver.py under
the proving environment's interpreter with the same allow-listed environment a run gets (standard
library, pytest and the MODULEs only; no module of `release`, never vLLM itself). It imports each
MODULE (one that fails to import is skipped), says `ready`, then reads one JSON request a line on
stdin and answers each with one JSON line on stdout, one run at a time:

    {"cwd": DIR, "env": {...}, "path": [DIR...], "site": DIR or null, "argv": [...], "timeout": S}
    -> {"status": N, "reports": [...], "output": TEXT}

For each run it forks a guard child (the run's subreaper, as vllm_fused_moe_evidence_guard.py is for a
process run), which forks the run: that process takes the request's environment, working directory and
`path` (the release's tree first, for the pristine run), adds `site` with `site.addsitedir` where the
request names one (the wheel's venv: its `.pth` files run, so our hook is active as in a user's
environment), and runs `pytest.main(argv)` with the tool's report plugin writing to a pipe the server
reads. The guard ends the run at `timeout` and, when it is over, every process it left. When stdin
closes (the tool ended or died), the server ends every process below it and exits.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import signal
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

import vllm_fused_moe_evidence_guard as guard

FD_VAR = guard.FD_VAR


def _run(request: dict[str, Any], report_fd: int, out_fd: int) -> None:
    """In the forked run: become the request's process, then pytest."""
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    # A fresh object: the server's watching thread held the old one's lock when we were forked.
    sys.stdin = os.fdopen(0, "r", closefd=False)
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ[FD_VAR] = str(report_fd)
    tempfile.tempdir = None  # the run's TMPDIR, not the one the server saw first
    os.chdir(request["cwd"])
    sys.path[:0] = list(request["path"])
    if request.get("site"):
        import site

        # Its .pth files run (the wheel's hook, as in a user's venv), and what it adds goes first, where a
        # venv's own site-packages is: the release's tree before any vLLM the server's interpreter has.
        before = list(sys.path)
        site.addsitedir(request["site"])
        sys.path[:] = [p for p in sys.path if p not in before] + before
    import pytest

    sys.argv = ["pytest", *request["argv"]]
    code = pytest.main(list(request["argv"]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def _guard(request: dict[str, Any], report_fd: int, out_fd: int, server: int) -> None:
    """In the forked guard: the run's subreaper; fork the run, wait for it or the deadline, end what it left."""
    os.setsid()
    guard.subreaper()
    run = os.fork()
    if run == 0:
        try:
            _run(request, report_fd, out_fd)
        except BaseException:  # said where the tool reads the run's output, as an interpreter would say it
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(70)
    os.close(report_fd)
    deadline = time.monotonic() + float(request["timeout"])
    status = None
    while status is None:
        pid, raw = os.waitpid(run, os.WNOHANG)
        if pid == run:
            status = os.waitstatus_to_exitcode(raw)
            break
        if time.monotonic() > deadline or os.getppid() != server:
            os.kill(run, signal.SIGKILL)
            os.waitpid(run, 0)
            status = guard.TIMED_OUT if time.monotonic() > deadline else guard.ORPHANED
            break
        time.sleep(0.05)
    left = guard.end_all()
    if left:
        os.write(out_fd, f"\nguard: ended {left} process(es) the run left behind\n".encode())
    os._exit(status if status >= 0 else 128 - status)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _read_into(fd: int, got: dict[str, bytes]) -> None:
    got["out"] = _read_all(fd)


def _watch(requests: Any, into: queue.Queue[str]) -> None:
    """Hand each request line to the server; at EOF (the tool ended or died, even mid-run) end everything."""
    for line in requests:
        into.put(line)
    guard.end_all()
    os._exit(0)


def serve(requests: Any, answer: Any) -> None:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_watch, args=(requests, lines), daemon=True).start()
    while True:
        line = lines.get()
        if not line.strip():
            continue
        request = json.loads(line)
        report_r, report_w = os.pipe()
        out_r, out_w = os.pipe()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            os.close(out_r)
            try:
                _guard(request, report_w, out_w, server)
            finally:
                os._exit(70)
        os.close(report_w)
        os.close(out_w)
        # Both pipes are read to their end before the wait: a run that writes much must not block on them.
        got: dict[str, bytes] = {}
        reader = threading.Thread(target=_read_into, args=(out_r, got))
        reader.start()
        reports = _read_all(report_r)
        reader.join()
        os.close(report_r)
        os.close(out_r)
        _, raw = os.waitpid(pid, 0)
        status = os.waitstatus_to_exitcode(raw)
        guard.reap()
        text = got.get("out", b"").decode("utf-8", "replace")[-20000:]
        reply = {"status": status, "reports": reports.decode("utf-8", "replace").splitlines(), "output": text}
        answer.write(json.dumps(reply) + "\n")
        answer.flush()


def main(modules: list[str]) -> int:
    guard.subreaper()  # what a guard child leaves when it is killed comes here, and is ended at the end
    try:
        import pytest  # noqa: F401  (without it no run can start: the tool then runs processes, which say so)
    except ImportError as exc:
        print(json.dumps({"ready": False, "why": str(exc)}), flush=True)
        return 1
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # a package this release line's environment lacks: its runs import what they need
            continue
    answer = os.fdopen(os.dup(1), "w")
    # The server's own stdout and stderr go nowhere a reply could be mixed with (a module that prints).
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    answer.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    answer.flush()
    try:
        serve(sys.stdin, answer)
    finally:
        guard.end_all()
    return 0


if __name__ == "__main__":
    status = main(sys.argv[1:])
    os._exit(status)
