"""The evidence stage's judgements, in-process: what counts as a clean run, what the cache may keep, the verdicts.

The runs themselves (pytest under an interpreter with torch, pip into a venv) are tests/e2e/test_evidence.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from release.core.errors import UnprovenWheelError
from release.evidence import cache
from release.evidence.gather import FIXED, NOT_AFFECTED, UNPROVEN, Evidence, refuse, refuse_backwards
from release.evidence.record import EvidenceRecord, HeldBug
from release.evidence.runner import ERROR, FAILED, PASSED, judge, verdict

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

    key = cache.key_of("pristine", "release-sha", "test.py", "sha256:test", "tool", "python")
    assert cache.cached_run(key, lambda: run(ERROR), clean)["result"] == ERROR
    assert cache.cached_run(key, lambda: run(FAILED), clean)["result"] == FAILED  # an error is computed again
    assert cache.cached_run(key, lambda: run(PASSED), clean)["result"] == FAILED  # a clean run is kept
    assert calls == [ERROR, FAILED]
    other = cache.key_of("pristine", "release-sha", "test.py", "sha256:changed", "tool", "python")
    assert other != key and cache.cached_run(other, lambda: run(PASSED), clean)["result"] == PASSED
    assert (tmp_path / "evidence" / f"{key}.json").is_file()


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
