"""Prove a patch's upstream regression test before it is offered: it fails where the bug is and passes with the fix.

Each run is pytest in a process of its own, in a scratch directory laid out as vLLM's checkout
(the test at its path under `tests/`, no conftest of ours), with one release's vLLM source first on
`PYTHONPATH`:

- the release's Python tree, read from its real release wheel (the cached one whose sha256 is the
  index's, every member checked against the wheel's RECORD) and extracted once into the wheel cache
  (`<cache>/wheels/<version>/python-<sha256 prefix>/vllm/`); compiled extensions are left out, as
  they load against CUDA builds of torch that a CPU interpreter does not have, and vLLM imports
  without them;
- "with this PR": that tree with the patch applied to the release's subtree by `git am --3way` in a
  scratch repository holding the PR's base first (so a release whose context moved still merges, as
  `rebase` merges it), the other files hard-linked from the cache.

The release's tree and the pytest run itself are release/evidence/runner.py's (the evidence every
published wheel carries runs the same tests the same way); this module only plans the runs and
applies the PR. It starts no process but git's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import PatchDoesNotApplyError, SourceError
from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE
from release.evidence.runner import run_test, source_tree
from release.model.patch import Patch

EXPECT_FAIL, EXPECT_PASS = "fail", "pass"


@dataclass(frozen=True)
class Run:
    """One run of the test: a release, with or without the PR, and what it must show."""

    tag: str
    patched: bool
    expect: str  # EXPECT_FAIL or EXPECT_PASS
    why: str  # why this release is in the plan, for PR.md


@dataclass(frozen=True)
class Outcome:
    run: Run
    result: str  # "passed", "failed" or "error" (collected nothing, errored, skipped)
    summary: str  # pytest's counts, e.g. "2 failed"
    detail: str  # the first failure's message, or why the run is an error
    seconds: float

    @property
    def as_expected(self) -> bool:
        return self.result == ("failed" if self.run.expect == EXPECT_FAIL else "passed")


# ------------------------------------------------------------------ the PR on a release's source


def _subtree(tree: Path) -> dict[str, bytes]:
    root = tree / UPSTREAM_SUBTREE
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def patched_tree(tree: Path, base: dict[str, bytes], mail: Path, work: Path, tag: str) -> Path:
    """`tree` with the PR applied to its subtree (`git am --3way` over the PR's base `base`), under `work`."""
    repo = WorkRepo.create(work / "repo")
    repo.commit_subtree(base, "the PR's base")
    pristine = _subtree(tree)
    repo.commit_subtree(pristine, tag)
    applied = repo.am(mail)
    if not applied.ok:
        raise PatchDoesNotApplyError(f"{mail.name} does not apply to vLLM {tag}'s subtree: {applied.err.strip()}")
    patched = repo.subtree_files()
    out = work / "python"
    shutil.copytree(tree / "vllm", out / "vllm", copy_function=_link_or_copy)
    subtree = out / UPSTREAM_SUBTREE
    for name in set(pristine) | set(patched):
        if pristine.get(name) == patched.get(name):
            continue
        (subtree / name).unlink(missing_ok=True)
        if name in patched:
            (subtree / name).parent.mkdir(parents=True, exist_ok=True)
            (subtree / name).write_bytes(patched[name])
    return out


def _link_or_copy(source: str, target: str) -> None:
    """A hard link where the cache and the scratch directory share a file system, else a copy.

    Either way the cache is never written: a changed file is unlinked and written anew.
    """
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def prove(
    runs: list[Run], mail: Patch, test_path: str, test_text: str, base: dict[str, bytes], python: str
) -> list[Outcome]:
    """The runs of the plan in order, each in a fresh scratch directory, up to the first not as expected."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-prove-") as tmp:
        mail_file = Path(tmp) / mail.name
        mail_file.write_text(mail.text, encoding="utf-8")
        for index, run in enumerate(runs):
            work = Path(tmp) / str(index)
            work.mkdir()
            started = time.monotonic()
            try:
                tree = source_tree(run.tag)
            except SourceError as exc:
                outcomes.append(Outcome(run, "error", "no source", str(exc), 0.0))
                break
            if run.patched:
                tree = patched_tree(tree, base, mail_file, work, run.tag)
            result, summary, detail = run_test(python, tree, test_path, test_text, work)
            outcomes.append(Outcome(run, result, summary, detail, time.monotonic() - started))
            if not outcomes[-1].as_expected:
                break  # the test proves nothing already: the runs left would only cost time
    return outcomes
