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

This module starts processes (pytest) and is named in the "processes" import contract for it
(pyproject.toml): the interpreter the test runs under needs torch and what vLLM imports, which the
tooling itself does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import NoPytestError, PatchDoesNotApplyError, SourceError
from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE
from release.core.versions import version_of_tag
from release.model.patch import Patch
from release.pristine import safe
from release.pristine.wheel import cache_dir, lookup, verified_content

# vLLM registers this marker in its pyproject.toml ("cpu_test: mark test as CPU-only test"); the
# scratch checkout registers it too, so a test marked as vLLM marks CPU tests runs without a warning.
NO_PYTEST = "No module named pytest"  # what `python -m pytest` says where pytest is not installed
PYTEST_INI = "[pytest]\nmarkers =\n    cpu_test: mark test as CPU-only test\n"
# A generous bound for one run: importing torch and vLLM's MoE modules on a loaded 2-core machine.
RUN_TIMEOUT_S = 600
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


# ------------------------------------------------------------------ vLLM's source of a release


def _python_member(name: str) -> bool:
    return name.startswith("vllm/") and not name.endswith((".so", "/")) and "__pycache__" not in name


def source_tree(tag: str) -> Path:
    """The directory whose `vllm/` is release `tag`'s Python tree, extracted once into the wheel cache.

    The directory is named after the sha256 the index lists for the wheel and appears whole (a
    rename) only after every member was read from the wheel with that sha256, so finding it is
    enough: the 250 MB wheel is not read and hashed again for every run.
    """
    version = version_of_tag(tag)
    target = cache_dir() / version / f"python-{lookup(version).sha256[:16]}"
    if target.is_dir():
        return target
    content = verified_content(version, _python_member)
    safe.check_names(content.files, content.wheel)  # names from the wheel are checked before they are paths
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".python-", dir=target.parent))
    try:
        for name, data in content.files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        try:
            staging.rename(target)  # whole or not at all; a concurrent run that got there first wins
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


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


# ------------------------------------------------------------------------------ one run


def run_test(python: str, tree: Path, test_path: str, test_text: str, work: Path) -> tuple[str, str, str]:
    """pytest on `test_path` with `tree` first on the path: (result, summary, detail)."""
    checkout = work / "checkout"
    (checkout / test_path).parent.mkdir(parents=True, exist_ok=True)
    (checkout / test_path).write_text(test_text, encoding="utf-8")
    (checkout / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    junit = work / "junit.xml"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # Our overlay, if installed in that interpreter, must not serve its files instead of the release's.
    env.update(PYTHONPATH=str(tree), VLLM_FUSED_MOE="off")
    if not env.get("PYTHONPYCACHEPREFIX"):
        # Compiled modules beside the wheel cache, never inside the extracted trees: without them every
        # run compiles torch's and vLLM's modules again (where PYTHONDONTWRITEBYTECODE is set, too).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache_dir().parent / "pycache")
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(checkout)]
    command += ["-c", str(checkout / "pytest.ini"), f"--junitxml={junit}", test_path]
    try:
        proc = subprocess.run(
            command, cwd=checkout, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return "error", "timed out", f"pytest ran past {RUN_TIMEOUT_S} s"
    except OSError as exc:
        return "error", "did not start", f"{python}: {exc.strerror}"
    if proc.returncode != 0 and NO_PYTEST in proc.stderr and not junit.exists():
        raise NoPytestError(f"{python} has no pytest: the regression test {test_path} cannot run there")
    counts, message = _junit(junit)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
    failed, errors, skipped, total = counts
    summary = (
        ", ".join(
            f"{n} {label}"
            for n, label in (
                (total - failed - errors - skipped, "passed"),
                (failed, "failed"),
                (errors, "errors"),
                (skipped, "skipped"),
            )
            if n
        )
        or "no test ran"
    )
    if proc.returncode == 0 and total and not skipped:
        return "passed", summary, ""
    if proc.returncode == 1 and failed and not errors:
        return "failed", summary, message
    return "error", summary, message or tail[0]


def _junit(path: Path) -> tuple[tuple[int, int, int, int], str]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return (0, 0, 0, 0), ""
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    totals = [sum(int(s.get(key, "0") or 0) for s in suites) for key in ("failures", "errors", "skipped", "tests")]
    first = root.find(".//testcase/failure")
    if first is None:
        first = root.find(".//testcase/error")
    message = (first.get("message", "") if first is not None else "").strip().splitlines()
    return (totals[0], totals[1], totals[2], totals[3]), (message[0] if message else "")


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
