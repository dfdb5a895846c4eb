"""A line's skip proven without torch: what `evidence` writes after a clean pass of the bug's test on a pristine
release (release/evidence/skips.py, through its own writer). The run itself needs the real release wheel and
torch, so it is tests/e2e/test_evidence.py's; a test of what reads the proof (`check`, `train add`, `scan`)
records it here, for the release wheel (its sha256) the proof names."""

from __future__ import annotations

from release.core.versions import version_of_tag
from release.evidence import skips
from release.queue.regression import BugTest
from release.queue.skip_proof import tool_digest

CLEAN_PASS = {"result": "passed", "summary": "1 passed", "key": "run"}  # release/evidence/runner.py's clean pass


def record_proof(tag: str, test: BugTest, release_sha256: str) -> None:
    """The proof that `test` passed cleanly on `tag`'s pristine release, the wheel with `release_sha256`, kept
    where release/queue/skip_proof.py reads it (under $VLLM_FUSED_MOE_CACHE, which the caller points at tmp)."""
    wheel = f"vllm-{version_of_tag(tag)}-py3-none-any.whl"
    skips._write(tag, test, tool_digest(), "python", wheel, release_sha256, dict(CLEAN_PASS))
