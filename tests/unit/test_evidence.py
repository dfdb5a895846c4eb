"""The evidence stage's judgements, in-process: what counts as a clean run, what the cache may keep, the verdicts.

The runs themselves (pytest under an interpreter with torch, pip into a venv) are tests/e2e/test_evidence.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from release.core.errors import UnprovenWheelError
from release.evidence import cache
from release.evidence.gather import FIXED, NOT_AFFECTED, UNPROVEN, Evidence, refuse, refuse_backwards
from release.evidence.runner import ERROR, FAILED, PASSED, verdict

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
        return lambda: calls.append(result) or {"result": result}

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
    held = [{**evidence((FAILED, PASSED, FIXED, True)).record, "wheel": {"name": "vllm_fused_moe-1.2.3+fm.1.whl"}}]
    refuse_backwards(evidence((FAILED, PASSED, FIXED, True)), held, "x")
    with pytest.raises(UnprovenWheelError) as refused:
        refuse_backwards(evidence(), held, "not publishing w")
    assert str(refused.value) == (
        f"not publishing w: vllm_fused_moe-1.2.3+fm.1.whl in the index fixes {BUG} on vLLM v1.2.3 (line some_line), "
        "this wheel does not: the index never goes backwards"
    )
