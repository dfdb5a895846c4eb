"""The evidence of one overlay wheel: each bug's regression test on its pristine vLLM release, with the wheel,
and with the same wheel built without that bug's fix.

What a wheel is for is read from its file name (`vllm_fused_moe-X+fm.N`: vLLM X), never from its
`_build_info.json`; the release line from patches/train.toml's entry for X, else the scan data,
else the wheel's build facts (a wrong line proves nothing: the line's test then fails to import,
which is an error, no evidence). Publish has already proven the wheel to be the checkout's own build
(release/overlay/rebuild.py). For each bug of the queue (release/queue/regression.py) the test runs on
the pristine release and with the wheel installed beside it (release/evidence/runner.py), and where
those two say `fixed`, a third time with the wheel the tool builds without that bug's patch (`without`,
which publish hands in); each run is cached by all its inputs (release/evidence/cache.py). The verdicts:

- `fixed`: a clean fail on the pristine release (it has the bug), a clean pass with the wheel and a
  clean fail with the wheel built without the fix (the fix, nothing else of the wheel or of how the
  runs are set up, is what makes the test pass);
- `not affected`: a clean pass on both (the release does not have the bug), and no record says it has
  it; no third run: a wheel that carried a patch for the bug would name it in its build facts, one of
  the records, and be refused;
- anything else is no evidence, and `refuse` says which bug, tag and line, which run disagreed and why.

The bugs to prove are every bug any record names for the release (`records`: patches/train.toml, the
scan data, the wheel's build facts, the index's earlier evidence of the release, each read by the
caller) and every bug patch of the queue: a recorded bug that no patch of the queue proves with its
test is refused, and a recorded bug is never `not affected` (a test that passes on an affected release
shows nothing). A release that no record knows and that is on no line has no bug to prove.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from release.core.errors import UnprovenWheelError
from release.core.git import head_commit
from release.core.hashing import file_sha256
from release.core.versions import version_of_tag
from release.evidence import envs, progress, runner
from release.evidence.cache import cached_run
from release.evidence.record import EvidenceRecord
from release.model.wheel import OverlayWheel
from release.pristine.wheel import lookup
from release.queue.bugs import affected_by
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


# The wheel the tool built without one bug's patch, for that bug's test: (the wheel, "") or (None, why there is none).
Without = Callable[[Path, BugTest], tuple[Path | None, str]]


def gather(
    checkout: Checkout,
    wheel: OverlayWheel,
    python: str | None,
    without: Without | None = None,
    records: dict[str, list[str]] | None = None,
) -> Evidence:
    """The evidence of `wheel` (each run cached); `refuse` judges it. `python`: an interpreter to run under
    (`--python`); None: the proving environment of the wheel's release line (release/evidence/envs.py).

    `without`: builds the wheel without a bug's patch for the third run (None: no third run, and no bug is
    `fixed`). `records`: {bug: [where it is recorded]} beyond patches/train.toml and the scan data, which are
    read here (the wheel's build facts, the index's evidence: the caller reads those)."""
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
    recorded = recorded_anywhere(checkout, tag, records or {})
    if not line:
        record["note"] = f"vLLM {version} is on no release line the train, the scan data or the wheel names"
        record["bugs"] = [_unproven_record(bug, sources, "") for bug, sources in sorted(recorded.items())]
        return Evidence(wheel.name, record)
    record["tool"]["commit"] = head_commit(layout.root)
    release = lookup(version)
    record["vllm"].update(wheel=release.filename, sha256=release.sha256)
    # The runs are keyed by what the environment has installed, not by where it lies (issue 43).
    env = envs.resolve(layout, line, python)
    record["python"], record["environment"] = env.python, env.digest
    python, identity = env.python, env.digest
    tests = checkout.bug_tests(line)
    for test in tests:
        inputs = (release.sha256, test.path, test.digest, tool, identity)
        said = f"evidence: vLLM {tag} {test.bug}"
        pristine = progress.timed(
            f"{said}: pristine",
            partial(cached_run, ("pristine", *inputs), partial(pristine_run, python, tag, test), _clean),
            _outcome,
        )
        installed = progress.timed(
            f"{said}: with {wheel.name}",
            partial(
                cached_run,
                ("wheel", wheel_sha, *inputs),
                partial(with_wheel, python, tag, wheel.path, test),
                _clean,
            ),
            _outcome,
        )
        runs = {"pristine": _result(pristine), "wheel": _result(installed)}
        verdict = _verdict(pristine["result"], installed["result"])
        if verdict == FIXED:
            # Two runs show the test tells the pristine release from the wheel, not that the fix is why.
            runs["without"] = progress.timed(
                f"{said}: without its fix",
                partial(_third_run, python, tag, wheel.path, test, inputs, without),
                _outcome,
            )
            if runs["without"]["result"] != runner.FAILED:
                verdict = UNPROVEN
        record["bugs"].append(
            {
                "bug": test.bug,
                "title": test.title,
                "patch": test.patch,
                "test": test.path,
                "test_sha256": test.digest,
                **runs,
                "verdict": verdict,
                "recorded": test.bug in recorded,
                "records": recorded.get(test.bug, []),
            }
        )
    proven = {test.bug for test in tests}
    record["bugs"] += [
        _unproven_record(bug, sources, line) for bug, sources in sorted(recorded.items()) if bug not in proven
    ]
    return Evidence(wheel.name, record)


def recorded_anywhere(checkout: Checkout, tag: str, more: dict[str, list[str]]) -> dict[str, list[str]]:
    """{bug: [each record that says `tag` has it]}: patches/train.toml (whether or not a patch still names the
    bug), the scan data and `more` (the wheel's build facts, the index's evidence)."""
    found: dict[str, list[str]] = {}
    for ident in checkout.recorded_bugs(tag):
        found.setdefault(ident, []).append("patches/train.toml")
    for scanned in affected_by(checkout.scan, version_of_tag(tag)):
        found.setdefault(scanned.id, []).append("the scan data")
    for ident, sources in more.items():
        found.setdefault(ident, []).extend(sources)
    return found


def _unproven_record(bug: str, sources: list[str], line: str) -> dict[str, Any]:
    """A recorded bug that no patch of the queue proves on `line`: no test can run for it."""
    return {"bug": bug, "test": "", "verdict": UNPROVEN, "recorded": True, "records": sources, "line": line}


def _third_run(
    python: str, tag: str, wheel: Path, test: BugTest, inputs: tuple[str, ...], without: Without | None
) -> dict[str, Any]:
    """The bug's test with the wheel built without the bug's patch: it must fail cleanly."""
    if without is None:
        return {"result": runner.ERROR, "summary": "not run", "detail": "no wheel without the fix was built"}
    built, problem = without(wheel, test)
    if built is None:
        return {"result": runner.ERROR, "summary": "not built", "detail": problem}
    digest = file_sha256(built)
    run = cached_run(("without", digest, *inputs), partial(with_wheel, python, tag, built, test), _clean)
    return {**_result(run), "wheel_sha256": digest}


def gather_all(
    checkout: Checkout,
    wheels: list[OverlayWheel],
    python: str | None,
    workers: int | None = None,
    without: Without | None = None,
    records: dict[str, dict[str, list[str]]] | None = None,
) -> list[Evidence]:
    """The evidence of each wheel, in order; `workers` wheels at a time (default: one per core), since each
    run spends its time importing torch and vLLM. `records`: per wheel name, the records `gather` takes."""
    workers = workers or os.cpu_count() or 1
    total = len(wheels)
    records = records or {}

    def one(numbered: tuple[int, OverlayWheel]) -> Evidence:
        n, wheel = numbered
        label = f"evidence: {n}/{total} {wheel.name}"
        return progress.timed(
            label, partial(gather, checkout, wheel, python, without, records.get(wheel.name)), _verdicts
        )

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


def with_wheel(python: str, tag: str, wheel: Path, test: BugTest) -> dict[str, Any]:
    with runner.work_dir() as tmp:
        venv_python, problem = runner.wheel_venv(python, tag, wheel, tmp)
        if problem:
            return {"result": runner.ERROR, "summary": "not installed", "detail": problem}
        result, summary, detail = runner.run_test(venv_python, None, test.path, test.text, tmp)
    return {"result": result, "summary": summary, "detail": detail}


def refuse(evidence: Evidence, what: str) -> None:
    """Refuse (UnprovenWheelError) evidence that does not prove every bug, naming the bug, the tag, the line and
    the run that disagreed."""
    problems = []
    for bug in evidence.bugs:
        where = f"bug {bug['bug']} on vLLM {evidence.tag} (line {evidence.line or 'none'})"
        records = ", ".join(bug.get("records") or []) or "the records"
        if not bug.get("test"):
            problems.append(
                f"{where}: {records} record(s) it, but no patch of the queue fixes it with a regression test on "
                "that line: a recorded bug is proven or the wheel is not published"
            )
            continue
        where += f", test {bug['test']}"
        pristine, installed = bug["pristine"], bug["wheel"]
        if bug["verdict"] == UNPROVEN:
            if installed["result"] != runner.PASSED:
                why = f"with the wheel it {_said(installed)}"
            elif pristine["result"] != runner.FAILED:
                why = f"on the pristine release it {_said(pristine)}, which is no evidence"
            else:
                third = bug.get("without") or {"result": runner.ERROR, "summary": "not run"}
                why = (
                    f"with the wheel built without {bug['patch']} it {_said(third)}: the test passes for a reason "
                    "other than the fix (it tells the runs apart, not the fix)"
                    if third["result"] == runner.PASSED
                    else f"with the wheel built without {bug['patch']} it {_said(third)}, which is no evidence"
                )
            problems.append(f"{where}: {why}")
        elif bug["verdict"] == NOT_AFFECTED and bug.get("recorded"):
            problems.append(
                f"{where}: {records} say(s) the release has the bug, but its test passes on the pristine release: "
                "the test does not show the bug there"
            )
    if problems:
        raise UnprovenWheelError(what=what, problems=problems)


def _said(run: dict[str, Any]) -> str:
    verb = {runner.FAILED: "fails", runner.ERROR: "errors", runner.PASSED: "passes"}.get(str(run["result"]), "errors")
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
