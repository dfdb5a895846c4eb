"""Every `contract(vllm=X)` nox session, each a real `nox` process of this run.

`nox -s test` runs the reduce contract on the head's group itself (tests/contract) and every
other group of train tags (tests/contract/groups.toml) here: one `nox -s "contract(vllm='X')"`
per session that `nox -l` lists, each an xdist group of its own. The sessions share the two
workers with the rest of the suite instead of running one after another once it has ended: a
session leaves a core idle while it installs, collects and starts its ranks' fork server, and
the suite fills it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from helpers import REPO, tag_facts

# What this run's own processes set, which would make the session's pytest take itself for part of it.
NOT_PASSED = (
    "VIRTUAL_ENV",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
)


def nox(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in NOT_PASSED}
    return subprocess.run(
        [sys.executable, "-m", "nox", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def contract_sessions() -> list[str]:
    """The `contract(vllm=X)` sessions noxfile.py defines: one per group of train tags but the head's."""
    listed = nox("-l", "--json", "-k", "contract", timeout=120)
    assert listed.returncode == 0, listed.stderr
    return [s["session"] for s in json.loads(listed.stdout) if s["session"].startswith("contract(")]


SESSIONS = contract_sessions()


def test_the_test_sessions_vllm_is_the_tag_vendor_was_built_from() -> None:
    # Only here does tests/contract run vendor/ itself (moe_contract/paths.py, `release_line`): a
    # `contract` session builds ours from its own release's files, so the head's group is this one's.
    assert tag_facts.installed_vllm() == tag_facts.head().version


def test_every_group_but_the_heads_has_a_session() -> None:
    # An empty list would make the test below pass by running nothing.
    assert SESSIONS, "noxfile.py lists no contract(vllm=X) session"


@pytest.mark.slow
@pytest.mark.parametrize(
    "session", [pytest.param(s, marks=pytest.mark.xdist_group(f"contract-session-{s}")) for s in SESSIONS]
)
def test_the_contract_session_of_each_group_passes(session: str) -> None:
    run = nox("-s", session, timeout=1800)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-8000:]
    summary = re.findall(r"=+ (\d+) passed(?:, (\d+) skipped)?(.*) in [\d.]+s", log)
    assert summary, log[-8000:]  # the suite ran and said so
    passed, _, rest = summary[-1]
    assert int(passed) > 0 and "failed" not in rest and "error" not in rest, log[-8000:]
    # What reads neither the release nor its FlashInfer runs once, in `test` (the `any_release` mark).
    assert "deselected" in rest, log[-8000:]
