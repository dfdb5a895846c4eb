"""Test-only fault injection: die by SIGKILL at a named write step.

`VLLM_FUSED_MOE_FAULT=STEP` (or `STEP@N`, the N-th time the step is reached) makes the
process kill itself with SIGKILL right after that step, the way an OOM killer or a pulled
plug would: no `finally`, no `atexit`, no flush of anything not yet written. The crash
tests (tests/cli/test_crash.py) kill every step listed in STEPS, then prove that the next
command finds the tree fully old or fully new. Unset, `fault_point` costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import sys

FAULT_ENV = "VLLM_FUSED_MOE_FAULT"

# Every step that writes, in the order a run reaches them; the crash tests kill each one.
REBASE_STEPS: dict[str, str] = {
    "rebase:work-dir": "the work directory .work/rebase-TAG/ exists, the scratch repo not yet",
    "rebase:replayed": "a patch was committed in the scratch repository",
    "rebase:state": "a conflict's state.json was written, its report not yet",
    "swap:staged": "the new outputs are staged under .work/swap/new/, no journal yet",
    "swap:journal": "the journal is written; nothing in vendor/ or patches/ has moved",
    "swap:moved-old": "one output's old version was moved aside, the new one not yet in place",
    "swap:moved-new": "one output's new version is in place",
    "swap:discarded": "every output is in place and the work directory is gone",
    "swap:done": "the journal is marked done, its directory not yet removed",
    "rebase:swapped": "the swap is complete, the report not yet written",
}
PUBLISH_STEPS: dict[str, str] = {
    "publish:dirs": "the index directories exist, nothing copied yet",
    "publish:copied": "one wheel was copied under a temporary name",
    "publish:page-written": "one page was written under a temporary name",
    "publish:requirements-written": "one requirements file was written under a temporary name",
    "publish:renamed": "one temporary file was renamed into place",
}
# write_atomic and copy_atomic (release/core/journal.py): every file written beside and renamed into
# place, among them each wheel `build` delivers into --out (`@N`: the N-th file of the run).
ATOMIC_STEPS: dict[str, str] = {
    "atomic:written": "a file is written and fsynced under its temporary name, not yet renamed",
    "atomic:renamed": "the file is renamed into place",
}
STEPS = {**REBASE_STEPS, **PUBLISH_STEPS, **ATOMIC_STEPS}

_reached: dict[str, int] = {}


def fault_point(step: str) -> None:
    """Kill this process here when VLLM_FUSED_MOE_FAULT names `step` (test-only)."""
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    if step not in STEPS:  # a typo in the code would make a crash test pass without killing anything
        raise AssertionError(f"fault_point({step!r}) is not listed in release.core.faults.STEPS")
    name, _, nth = wanted.partition("@")
    if name != step:
        return
    _reached[step] = _reached.get(step, 0) + 1
    if _reached[step] == int(nth or 1):
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
