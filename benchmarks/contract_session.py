"""Time one `contract(vllm=X)` nox session (printed, never asserted): wall time and CPU of every process.

    python3 benchmarks/contract_session.py X [-- PYTEST ARGS]

The session's ranks fork from a forkserver that pytest never waits for, so `time` misses them.
This script makes itself the child subreaper (Linux prctl): every process the session leaves
behind is reparented to it and reaped here, so RUSAGE_CHILDREN holds the CPU of them all. CPU
time moves less with the machine's load than wall time: compare both, with the load printed.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    version, rest = argv[0], argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"prctl: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 1
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "nox", "-s", f"contract(vllm='{version}')", *rest], check=False)
    while True:  # the orphans: the forkserver and whatever it forked
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    wall = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"contract(vllm='{version}'): rc {code.returncode}, wall {wall:.1f} s, "
        f"CPU {usage.ru_utime + usage.ru_stime:.1f} s (user {usage.ru_utime:.1f}, sys {usage.ru_stime:.1f}), "
        f"load {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    return code.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
