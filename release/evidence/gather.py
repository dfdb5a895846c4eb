"""The evidence of one overlay wheel: each bug's regression test on its pristine vLLM release and with the wheel.

What a wheel is for is read from its file name (`vllm_fused_moe-X+fm.N`: vLLM X), never from its
`_build_info.json`; the release line from patches/train.toml's entry for X, else the scan data,
else the wheel's build facts (a wrong line proves nothing: the line's test then fails to import,
which is an error, no evidence). For each bug of the queue (release/queue/regression.py) the test
runs on the pristine release and with the wheel installed beside it (release/evidence/runner.py);
each run is cached by all its inputs (release/evidence/cache.py). The verdicts:

- `fixed`: a clean fail on the pristine release (it has the bug) and a clean pass with the wheel;
- `not affected`: a clean pass on both (the release does not have the bug);
- anything else is no evidence, and `refuse` says which bug, tag and line, and why.

The records are checked against it: a bug that patches/train.toml or the scan data says the
release has must be `fixed`, never `not affected` (a test that passes on an affected release shows
nothing). A release that no record knows (on no line) has no bug this queue knows to prove.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from release.core.errors import UnprovenWheelError
from release.core.git import head_commit
from release.evidence import envs, progress, runner
from release.evidence.cache import cached_run, key_of
from release.evidence.record import EvidenceRecord
from release.model.wheel import OverlayWheel
from release.pristine.wheel import lookup
from release.queue.bugs import required_bugs
from release.queue.regression import BugTest
from release.queue.skip_proof import tool_digest
from release.queue.snapshot import Checkout

SCHEMA = 1
FIXED, NOT_AFFECTED, UNPROVEN = "fixed", "not affected", "unproven"


@dataclass(frozen=True)
class Evidence:
    wheel: str  # file name
    record: dict[str, Any]  # what is kept beside the wheel in the index (INDEX_DIR/evidence/<wheel>.json)

    @property
    def tag(self) -> str:
        return str(self.record["vllm"]["tag"])

    @property
    def line(self) -> str:
        return str(self.record.get("line") or "")

    @property
    def bugs(self) -> list[dict[str, Any]]:
        return list(self.record["bugs"])

    def fixed(self) -> set[str]:
        return {str(b["bug"]) for b in self.bugs if b.get("verdict") == FIXED}

    def text(self) -> bytes:
        return (json.dumps(self.record, indent=1, sort_keys=True) + "\n").encode()


def wheel_release(path: Path) -> str:
    """The vLLM release a wheel of ours is for, from its file name (X of X+fm.N)."""
    try:
        return parse_wheel_filename(path.name)[1].public
    except InvalidWheelFilename as exc:
        raise UnprovenWheelError(what=path.name, problems=[f"not a wheel file name ({exc})"]) from None


def release_line(checkout: Checkout, version: str, wheel: OverlayWheel) -> str:
    tag = f"v{version}"
    entry = checkout.train_entry(tag)
    data = checkout.scan
    if entry is not None:
        return entry.line
    scanned = (data or {}).get("releases", {}).get(version)
    if isinstance(scanned, dict) and isinstance(scanned.get("line"), str):
        return str(scanned["line"])
    line = (wheel.build_info or {}).get("line")  # no facts: the line is unknown
    return line if isinstance(line, str) else ""


def gather(checkout: Checkout, wheel: OverlayWheel, python: str | None) -> Evidence:
    """The evidence of `wheel` (each run cached); `refuse` judges it. `python`: an interpreter to run under
    (`--python`); None: the proving environment of the wheel's release line (release/evidence/envs.py)."""
    layout = checkout.layout
    version = wheel_release(wheel.path)
    tag = f"v{version}"
    line = release_line(checkout, version, wheel)
    wheel_sha = wheel.sha256
    tool = tool_digest()
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "wheel": {"name": wheel.name, "sha256": wheel_sha},
        "vllm": {"tag": tag, "version": version, "wheel": None, "sha256": None},
        "line": line,
        "tool": {"digest": tool, "commit": ""},
        "python": python or "",
        "bugs": [],
    }
    if not line:
        record["note"] = f"vLLM {version} is on no release line the train, the scan data or the wheel names"
        return Evidence(wheel.name, record)
    records = {bug.id for bug, _ in required_bugs(checkout, tag)} | set(checkout.recorded_bugs(tag))
    record["tool"]["commit"] = head_commit(layout.root)
    release = lookup(version)
    record["vllm"].update(wheel=release.filename, sha256=release.sha256)
    # The runs are keyed by what the environment has installed, not by where it lies (issue 43).
    env = envs.resolve(layout, line, python)
    record["python"], record["environment"] = env.python, env.digest
    python, identity = env.python, env.digest
    for test in checkout.bug_tests(line):
        inputs = (release.sha256, test.path, test.digest, tool, identity)
        said = f"evidence: vLLM {tag} {test.bug}"
        pristine = progress.timed(
            f"{said}: pristine",
            partial(cached_run, key_of("pristine", *inputs), partial(pristine_run, python, tag, test), _clean),
            _outcome,
        )
        installed = progress.timed(
            f"{said}: with {wheel.name}",
            partial(
                cached_run,
                key_of("wheel", wheel_sha, *inputs),
                partial(_with_wheel, python, tag, wheel.path, test),
                _clean,
            ),
            _outcome,
        )
        record["bugs"].append(
            {
                "bug": test.bug,
                "title": test.title,
                "patch": test.patch,
                "test": test.path,
                "test_sha256": test.digest,
                "pristine": _result(pristine),
                "wheel": _result(installed),
                "verdict": _verdict(pristine["result"], installed["result"]),
                "recorded": test.bug in records,
            }
        )
    return Evidence(wheel.name, record)


def gather_all(
    checkout: Checkout, wheels: list[OverlayWheel], python: str | None, workers: int | None = None
) -> list[Evidence]:
    """The evidence of each wheel, in order; `workers` wheels at a time (default: one per core), since each
    run is a process of its own that spends its time importing torch and vLLM."""
    workers = workers or os.cpu_count() or 1
    total = len(wheels)

    def one(numbered: tuple[int, OverlayWheel]) -> Evidence:
        n, wheel = numbered
        label = f"evidence: {n}/{total} {wheel.name}"
        return progress.timed(label, partial(gather, checkout, wheel, python), _verdicts)

    with progress.heartbeat("evidence"):
        if workers == 1 or total < 2:
            return [one(item) for item in enumerate(wheels, 1)]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, enumerate(wheels, 1)))


def _outcome(run: dict[str, Any]) -> str:
    return f"{run.get('result')} ({run.get('summary', '')})"


def _verdicts(evidence: Evidence) -> str:
    return ", ".join(f"{b['bug']} {b['verdict']}" for b in evidence.bugs) or "no bug to prove"


def _clean(result: dict[str, Any]) -> bool:
    return result.get("result") in (runner.PASSED, runner.FAILED)


def _result(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run[k] for k in ("result", "summary", "detail", "key") if k in run}


def _verdict(pristine: str, installed: str) -> str:
    if installed == runner.PASSED and pristine == runner.FAILED:
        return FIXED
    if installed == runner.PASSED and pristine == runner.PASSED:
        return NOT_AFFECTED
    return UNPROVEN


def pristine_run(python: str, tag: str, test: BugTest) -> dict[str, Any]:
    with runner.work_dir() as tmp:
        result, summary, detail = runner.run_test(python, runner.source_tree(tag), test.path, test.text, tmp)
    return {"result": result, "summary": summary, "detail": detail}


def _with_wheel(python: str, tag: str, wheel: Path, test: BugTest) -> dict[str, Any]:
    with runner.work_dir() as tmp:
        venv_python, problem = runner.wheel_venv(python, tag, wheel, tmp)
        if problem:
            return {"result": runner.ERROR, "summary": "not installed", "detail": problem}
        result, summary, detail = runner.run_test(venv_python, None, test.path, test.text, tmp)
    return {"result": result, "summary": summary, "detail": detail}


def refuse(evidence: Evidence, what: str) -> None:
    """Refuse (UnprovenWheelError) evidence that does not prove every bug, naming the bug, the tag and the line."""
    problems = []
    for bug in evidence.bugs:
        pristine, installed = bug["pristine"], bug["wheel"]
        where = f"bug {bug['bug']} on vLLM {evidence.tag} (line {evidence.line}), test {bug['test']}"
        if bug["verdict"] == UNPROVEN:
            if installed["result"] != runner.PASSED:
                why = f"with the wheel it {_said(installed)}"
            else:
                why = f"on the pristine release it {_said(pristine)}, which is no evidence"
            problems.append(f"{where}: {why}")
        elif bug["verdict"] == NOT_AFFECTED and bug.get("recorded"):
            problems.append(
                f"{where}: the records (patches/train.toml, the scan data) say the release has the bug, but its test "
                "passes on the pristine release: the test does not show the bug there"
            )
    if problems:
        raise UnprovenWheelError(what=what, problems=problems)


def _said(run: dict[str, Any]) -> str:
    verb = {runner.FAILED: "fails", runner.ERROR: "errors", runner.PASSED: "passes"}[str(run["result"])]
    detail = f": {run['detail']}" if run.get("detail") else ""
    return f"{verb} ({run.get('summary', '')}{detail})"


def refuse_backwards(evidence: Evidence, held: list[EvidenceRecord], what: str) -> None:
    """A new patch level fixes at least every bug the index's evidence says an earlier level of the release fixed.

    `held`: the index's records, read and bound to their wheels by release/evidence/record.py."""
    for old in held:
        if old.vllm_version != evidence.record["vllm"]["version"]:
            continue
        lost = sorted(old.with_verdict(FIXED) - evidence.fixed())
        if lost:
            raise UnprovenWheelError(
                what=what,
                problems=[
                    f"{old.wheel} in the index fixes {', '.join(lost)} on vLLM "
                    f"{evidence.tag} (line {evidence.line}), this wheel does not: the index never goes backwards"
                ],
            )
