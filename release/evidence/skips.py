"""The proof of a line's `skip` of a bug's patch: the bug's test run on each of the line's pristine releases.

Where the test passes cleanly there, the release does without the bug and the skip stands: the proof
is written where `check` and `train add` read it (release/queue/skip_proof.py). Where it fails, the
release has the bug and the line must carry the fix; an error proves nothing. Each run is the
evidence cache's (release/evidence/cache.py), so a second proof of the same inputs costs nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from release.core.journal import write_atomic
from release.core.seal import sealed
from release.core.versions import version_of_tag
from release.evidence import envs, progress, runner
from release.evidence.cache import cache_root, cached_run
from release.evidence.gather import pristine_run
from release.pristine.wheel import lookup
from release.queue.regression import BugTest
from release.queue.skip_proof import PASSED, proof_key, proof_path, skipped_bug_tests, tool_digest
from release.queue.snapshot import Checkout


@dataclass(frozen=True)
class SkipRun:
    tag: str
    test: BugTest
    run: dict[str, Any]

    @property
    def proven(self) -> bool:
        return self.run.get("result") == PASSED

    def sentence(self) -> str:
        where = f"bug {self.test.bug} on vLLM {self.tag} (line {self.test.line}), test {self.test.path}"
        if self.proven:
            return f"proven: {where}: passes on the pristine release; the skip of {self.test.patch} stands"
        detail = f": {self.run['detail']}" if self.run.get("detail") else ""
        if self.run.get("result") == runner.FAILED:
            why = f"fails on the pristine release ({self.run.get('summary', '')}{detail}): the release has the bug; "
            return f"not proven: {where}: {why}carry the fix (`python -m release pq carry {self.test.patch}`)"
        return f"not proven: {where}: errors ({self.run.get('summary', '')}{detail}), which is no evidence"


def prove(checkout: Checkout, tag: str, line: str, python: str | None) -> list[SkipRun]:
    """Run each skipped bug's test on `tag`'s pristine release under `python` (None: the line's proving
    environment, release/evidence/envs.py); write the proof of each clean pass."""
    tests = skipped_bug_tests(checkout, line)
    if not tests:
        return []
    version, tool = version_of_tag(tag), tool_digest()
    release = lookup(version)
    env = envs.resolve(checkout.layout, line, python)
    python, identity = env.python, env.digest  # keyed by what it has installed, not by where it lies
    found = []
    for test in tests:
        inputs = (release.sha256, test.path, test.digest, tool, identity)
        run = progress.timed(
            f"evidence: vLLM {tag} {test.bug}: pristine",
            partial(cached_run, ("pristine", *inputs), partial(pristine_run, python, tag, test), _clean),
            lambda done: f"{done.get('result')} ({done.get('summary', '')})",
        )
        if run.get("result") == PASSED:
            _write(tag, test, tool, identity, release.filename, release.sha256, run)
        found.append(SkipRun(tag, test, run))
    return found


def _clean(result: dict[str, Any]) -> bool:
    return result.get("result") in (runner.PASSED, runner.FAILED)


def _write(tag: str, test: BugTest, tool: str, python: str, wheel: str, sha256: str, run: dict[str, Any]) -> None:
    version = version_of_tag(tag)
    record = {
        "key": proof_key(version, test, tool),
        "result": run["result"],
        "summary": run.get("summary", ""),
        "vllm": {"tag": tag, "version": version, "wheel": wheel, "sha256": sha256},
        "line": test.line,
        "bug": test.bug,
        "patch": test.patch,
        "test": test.path,
        "test_sha256": test.digest,
        "tool": tool,
        "python": python,
        "run": run.get("key", ""),
    }
    path = proof_path(version, test, tool)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Sealed (release/core/seal.py): a proof any other process writes for the test is no proof to check.
    write_atomic(path, (json.dumps(sealed(cache_root(), record), indent=1, sort_keys=True) + "\n").encode())
