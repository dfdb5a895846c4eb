"""The guard of one run: starts the run's command, and ends every process the run leaves behind.

`PYTHON vllm_fused_moe_evidence_guard.py SECONDS -- COMMAND...`, started by release/evidence/runner.py
under the proving environment's interpreter (standard library only; it is no module of `release`).

- It makes itself the run's child subreaper (Linux's PR_SET_CHILD_SUBREAPER): a process the run
  starts and orphans (a daemon that double-forks and calls setsid, which leaves the process group)
  is re-parented to the guard, not to init, so the guard still finds it.
- When the command ends, when SECONDS pass (exit 124), or when the tool that started the guard dies
  (its end of the guard's stdin closes; exit 125), the guard kills the command and then every
  process below itself, until none is left, and exits with the command's status.
- The command's pipe to the tool (VLLM_FUSED_MOE_EVIDENCE_FD) is passed on to it, and the guard keeps
  no copy: the tool reads the run's reports there (release/evidence/child/vllm_fused_moe_evidence_report.py).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
TIMED_OUT, ORPHANED = 124, 125
FD_VAR = "VLLM_FUSED_MOE_EVIDENCE_FD"


def subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def descendants() -> set[int]:
    """Every live process whose chain of parents reaches this one (orphans re-parented to it included)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[1].split()
        if fields[0] != b"Z":  # a zombie is already dead: reaping it is enough
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= frontier
    return found


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_all() -> int:
    """Kill every descendant until none is left; how many were killed."""
    killed: set[int] = set()
    for _ in range(200):
        left = descendants()
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        time.sleep(0.02)
        reap()
    reap()
    return len(killed)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: guard SECONDS -- COMMAND...", file=sys.stderr)
        return 2
    seconds, command = float(argv[1]), argv[3:]
    if not subreaper():
        print("guard: no child subreaper here; an orphaned daemon may outlive the run", file=sys.stderr)
    fd = int(os.environ.get(FD_VAR, "-1"))
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, pass_fds=(fd,) if fd >= 0 else ())
    if fd >= 0:
        os.close(fd)  # the run's copy is the only one: the tool sees the pipe close when the run is done
    gone = threading.Event()

    def watch() -> None:
        # os.read, not sys.stdin: a daemon thread blocked in a buffered read aborts the interpreter at exit.
        while os.read(0, 4096):
            pass
        gone.set()  # EOF: the tool that started us has ended (or died)

    threading.Thread(target=watch, daemon=True).start()
    deadline = time.monotonic() + seconds
    code: int | None = None
    why = 0
    while code is None:
        try:
            code = proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            if gone.is_set():
                why = ORPHANED
            elif time.monotonic() > deadline:
                why = TIMED_OUT
            if why:
                proc.kill()
                proc.wait()
                code = why
    left = end_all()
    if left:
        print(f"guard: ended {left} process(es) the run left behind", file=sys.stderr)
    return code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    status = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # past interpreter shutdown, where the watching thread still blocks in its read
