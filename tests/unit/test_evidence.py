"""The evidence stage's judgements, in-process: what counts as a clean run, what the cache may keep, the verdicts.

The runs themselves (pytest under an interpreter with torch, pip into a venv) are tests/e2e/test_evidence.py's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from helpers import tag_facts
from helpers.synthetic import demo_wheel
from helpers.train import load_train
from release.core.errors import UnprovenWheelError
from release.core.layout import Layout
from release.evidence import cache
from release.evidence.gather import (
    FIXED,
    NOT_AFFECTED,
    UNPROVEN,
    Evidence,
    recorded_anywhere,
    refuse,
    refuse_backwards,
)
from release.evidence.record import EvidenceRecord, HeldBug
from release.evidence.runner import ERROR, FAILED, PASSED, judge, verdict
from release.overlay.publish import records_of
from release.overlay.wheel import read_wheel
from release.queue.snapshot import Checkout

BUG = "https://example.org/bug/1"


@pytest.mark.parametrize(
    ("returncode", "counts", "expected"),
    [
        (0, (0, 0, 0, 2), PASSED),
        (1, (2, 0, 0, 2), FAILED),
        (1, (1, 0, 0, 2), FAILED),  # one of two failed: the bug is there
        (0, (0, 0, 1, 2), ERROR),  # a skip proves nothing
        (5, (0, 0, 0, 0), ERROR),  # nothing collected
        (2, (0, 1, 0, 1), ERROR),  # an import error at collection
        (1, (1, 1, 0, 2), ERROR),  # a failure beside an error
        (0, (0, 0, 0, 0), ERROR),  # exit 0 with no test
    ],
)
def test_only_a_clean_pass_or_a_clean_fail_counts(
    returncode: int, counts: tuple[int, int, int, int], expected: str
) -> None:
    assert verdict(returncode, counts) == expected


def test_the_cache_keeps_clean_runs_only_and_a_changed_input_is_another_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path))
    calls: list[str] = []

    def run(result: str) -> dict[str, Any]:
        calls.append(result)
        return {"result": result}

    def clean(r: dict[str, Any]) -> bool:
        return r["result"] in (PASSED, FAILED)

    inputs = ("pristine", "release-sha", "test.py", "sha256:test", "tool", "python")
    key = cache.key_of(*inputs)
    assert cache.cached_run(inputs, lambda: run(ERROR), clean)["result"] == ERROR
    assert cache.cached_run(inputs, lambda: run(FAILED), clean)["result"] == FAILED  # an error is computed again
    assert cache.cached_run(inputs, lambda: run(PASSED), clean)["result"] == FAILED  # a clean run is kept
    assert calls == [ERROR, FAILED]
    other = ("pristine", "release-sha", "test.py", "sha256:changed", "tool", "python")
    assert cache.key_of(*other) != key and cache.cached_run(other, lambda: run(PASSED), clean)["result"] == PASSED
    assert (tmp_path / "evidence" / f"{key}.json").is_file()


@pytest.mark.parametrize("edit", ["failed to passed", "inputs changed", "copied from another key", "no mac"])
def test_a_cache_entry_the_tool_did_not_write_stands_for_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    """Issue 43: one entry edited from `failed` to `passed` published a fix-less wheel. An entry is trusted only
    when its recorded inputs hash to its key and the MAC under the cache's secret covers it; else it is run again."""
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path))
    inputs = ("wheel", "wheel-sha", "release-sha", "test.py", "sha256:test", "tool", "python")
    other = ("wheel", "other-wheel-sha", "release-sha", "test.py", "sha256:test", "tool", "python")
    calls: list[str] = []

    def run(result: str) -> Any:
        def compute() -> dict[str, Any]:
            calls.append(result)
            return {"result": result}

        return compute

    def clean(r: dict[str, Any]) -> bool:
        return r["result"] in (PASSED, FAILED)

    assert cache.cached_run(inputs, run(FAILED), clean)["result"] == FAILED
    assert cache.cached_run(other, run(PASSED), clean)["result"] == PASSED
    path = tmp_path / "evidence" / f"{cache.key_of(*inputs)}.json"
    entry = json.loads(path.read_text())
    forged = {
        "failed to passed": {**entry, "result": PASSED},
        "inputs changed": {**entry, "inputs": list(other)},
        "copied from another key": {
            **json.loads((tmp_path / "evidence" / f"{cache.key_of(*other)}.json").read_text()),
            "key": entry["key"],
        },
        "no mac": {k: v for k, v in {**entry, "result": PASSED}.items() if k != "mac"},
    }[edit]
    path.write_text(json.dumps(forged))
    assert cache.cached_run(inputs, run(FAILED), clean)["result"] == FAILED  # run again, not read
    assert calls == [FAILED, PASSED, FAILED]
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600


def evidence(*bugs: tuple[str, str, str, bool]) -> Evidence:
    """Evidence of a wheel for vLLM 1.2.3 on line `some_line`: per bug (pristine result, wheel result, verdict,
    recorded)."""
    return Evidence(
        "vllm_fused_moe-1.2.3+fm.2-py3-none-any.whl",
        {
            "wheel": {"name": "vllm_fused_moe-1.2.3+fm.2-py3-none-any.whl"},
            "vllm": {"tag": "v1.2.3", "version": "1.2.3"},
            "line": "some_line",
            "bugs": [
                {
                    "bug": BUG,
                    "test": "tests/test_bug.py",
                    "pristine": {"result": p, "summary": "", "detail": ""},
                    "wheel": {"result": w, "summary": "1 failed" if w == FAILED else "", "detail": "assert False"},
                    "verdict": v,
                    "recorded": r,
                }
                for p, w, v, r in bugs
            ],
        },
    )


def test_the_verdicts_refuse_naming_the_bug_the_tag_and_the_line() -> None:
    refuse(evidence((FAILED, PASSED, FIXED, True)), "x")  # fixed: nothing to say
    refuse(evidence((PASSED, PASSED, NOT_AFFECTED, False)), "x")  # the release has not the bug
    where = f"not publishing w: bug {BUG} on vLLM v1.2.3 (line some_line), test tests/test_bug.py"
    with pytest.raises(UnprovenWheelError) as refused:
        refuse(evidence((FAILED, FAILED, UNPROVEN, True)), "not publishing w")
    assert str(refused.value) == f"{where}: with the wheel it fails (1 failed: assert False)"
    with pytest.raises(UnprovenWheelError) as refused:
        refuse(evidence((ERROR, PASSED, UNPROVEN, False)), "not publishing w")
    assert str(refused.value).startswith(f"{where}: on the pristine release it errors")
    with pytest.raises(UnprovenWheelError) as refused:  # the records say affected; the test does not show it
        refuse(evidence((PASSED, PASSED, NOT_AFFECTED, True)), "not publishing w")
    assert str(refused.value).startswith(f"{where}: the records")


def test_the_index_never_goes_backwards() -> None:
    held = [
        EvidenceRecord(Path("held.json"), "vllm_fused_moe-1.2.3+fm.1.whl", "ab" * 32, "1.2.3", (HeldBug(BUG, FIXED),))
    ]
    refuse_backwards(evidence((FAILED, PASSED, FIXED, True)), held, "x")
    with pytest.raises(UnprovenWheelError) as refused:
        refuse_backwards(evidence(), held, "not publishing w")
    assert str(refused.value) == (
        f"not publishing w: vllm_fused_moe-1.2.3+fm.1.whl in the index fixes {BUG} on vLLM v1.2.3 (line some_line), "
        "this wheel does not: the index never goes backwards"
    )


def _test(outcome: str, when: str = "call", xfail: bool = False) -> dict[str, Any]:
    return {"kind": "test", "id": "t.py::t", "when": when, "outcome": outcome, "xfail": xfail, "message": "m"}


def _end(status: int) -> dict[str, Any]:
    return {"kind": "session", "exitstatus": status, "collected": 1}


@pytest.mark.parametrize(
    ("returncode", "reports", "expected", "detail"),
    [
        (1, [_test("failed"), _end(1)], FAILED, "m"),
        (0, [_test("passed"), _end(0)], PASSED, ""),
        (0, [_test("passed")], ERROR, "before pytest reported its end"),  # os._exit(0) in the test
        (0, [_test("failed"), _end(1)], ERROR, "pytest reported exit 1, but the run exited 0"),  # rewritten at exit
        (0, [_test("passed", xfail=True), _end(0)], ERROR, ""),  # an xpass/xfail is no clean run
        (1, [_test("failed", when="setup"), _end(1)], ERROR, "m"),  # a fixture error
        (2, [{"kind": "collect", "id": "t.py", "outcome": "failed", "message": "m"}, _end(2)], ERROR, "m"),
        (1, [{"kind": "made up"}, _end(1)], ERROR, "never writes"),  # not the tool's plugin's line
    ],
)
def test_the_verdict_is_what_the_tools_plugin_reported_held_to_the_exit_status(
    returncode: int, reports: list[dict[str, Any]], expected: str, detail: str
) -> None:
    result, _, said = judge(returncode, reports, "tail")
    assert result == expected and detail in said, (result, said)


def test_a_recorded_bug_that_no_patch_proves_is_refused(project: Path) -> None:
    """Issue 43, paths 3 and 4: the bugs to prove are every record's. With patches/train.toml's `bugs` emptied and
    the release's scan entry gone (what a partial scan leaves), the wheel's build facts and the index's evidence
    still name the bug; a bug no patch of the queue proves on the line is refused, naming every record of it."""
    layout = Layout(project)
    entry = tag_facts.older_line_tag(load_train(layout))
    [bug] = entry.bugs
    train = load_train(layout)
    layout.train.write_text(train.with_entry(replace(entry, bugs=())).dumps())
    data = json.loads(layout.affected_json.read_text())
    del data["releases"][entry.tag.removeprefix("v")]
    layout.affected_json.write_text(json.dumps(data))
    index = project.parent / "index"
    old = f"vllm_fused_moe-{entry.tag.removeprefix('v')}+fm.1-py3-none-any.whl"
    held = [EvidenceRecord(index / "evidence" / f"{old}.json", old, "a" * 64, entry.tag.removeprefix("v"), (
        HeldBug(bug, FIXED),
    ))]  # fmt: skip
    patches = [{"name": "0001-x.patch", "bug": bug, "trailers": {}}]
    wheel = demo_wheel(index.parent / "dist", f"{entry.tag.removeprefix('v')}+fm.2", {"patches": patches})
    more = records_of([read_wheel(wheel)], held)[wheel.name]
    assert more == {bug: ["the wheel's build facts", f"the index's evidence of {old}"]}
    recorded = recorded_anywhere(Checkout.load(layout), entry.tag, more)
    assert recorded == more  # the checkout's own records say nothing any more
    unproven = Evidence(wheel.name, {"vllm": {"tag": entry.tag}, "line": entry.line, "bugs": [
        {"bug": bug, "test": "", "verdict": UNPROVEN, "recorded": True, "records": recorded[bug]}
    ]})  # fmt: skip
    with pytest.raises(UnprovenWheelError) as refused:
        refuse(unproven, f"not publishing {wheel.name}")
    assert str(refused.value) == (
        f"not publishing {wheel.name}: bug {bug} on vLLM {entry.tag} (line {entry.line}): the wheel's build facts, "
        f"the index's evidence of {old} record(s) it, but no patch of the queue fixes it with a regression test on "
        "that line: a recorded bug is proven or the wheel is not published"
    )


def test_not_affected_needs_every_record_to_agree() -> None:
    """A test that always passes gives `not affected` (pristine passes, the wheel passes); any one record that says
    the release has the bug refuses it, naming that record."""
    said = evidence((PASSED, PASSED, NOT_AFFECTED, True))
    said.record["bugs"][0]["records"] = ["the wheel's build facts"]
    with pytest.raises(UnprovenWheelError) as refused:
        refuse(said, "not publishing w")
    assert "test tests/test_bug.py: the wheel's build facts say(s) the release has the bug, but its test passes" in str(
        refused.value
    )


def test_a_fixed_verdict_needs_the_run_without_the_fix_to_fail() -> None:
    """Pristine fails and the wheel passes, but the wheel built without the bug's patch passes too: refused, naming
    that run (the test tells the runs apart, not the fix)."""
    said = evidence((FAILED, PASSED, UNPROVEN, True))
    said.record["bugs"][0].update(patch="0001-fix.patch", without={"result": PASSED, "summary": "1 passed"})
    with pytest.raises(UnprovenWheelError) as refused:
        refuse(said, "not publishing w")
    assert str(refused.value).endswith(
        "test tests/test_bug.py: with the wheel built without 0001-fix.patch it passes (1 passed): the test passes for "
        "a reason other than the fix (it tells the runs apart, not the fix)"
    )
