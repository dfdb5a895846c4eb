"""The overlay's version decisions, called directly (the fresh-venv tests cover the wiring).

The fresh venvs only ever hold the verified FlashInfer, so the out-of-range warning and
its strict error are checked here on the real functions, with the installed version
given as an argument or read from a monkeypatched metadata lookup.
"""

from __future__ import annotations

import logging

import pytest

from helpers.build_facts import INFO
from helpers.hook_log import Said, hook_sees
from vllm_fused_moe import MODE_ENV, _activate
from vllm_fused_moe._finder import LOGGER_NAME


@pytest.mark.parametrize(
    "installed, problem",
    [
        (None, None),
        ("0.6.8.post1", None),
        ("0.7.3", "flashinfer-python 0.7.3 is outside the verified range ==0.6.8.post1"),
        ("0.6.8", "flashinfer-python 0.6.8 is outside"),
        ("not-a-version", "outside"),
    ],
)
def test_flashinfer_range(installed: str | None, problem: str | None) -> None:
    found = _activate.flashinfer_problem(installed, "==0.6.8.post1")
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    "installed, ok", [("0.20.0", True), ("0.20.0+cu129", True), ("0.21.0", False), ("0.20.1", False)]
)
def test_vllm_version(installed: str, ok: bool) -> None:
    assert (_activate.vllm_problem(INFO, installed) is None) is ok


@pytest.fixture
def outside_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    hook_sees(monkeypatch, flashinfer="0.7.3")


def test_outside_flashinfer_warns_and_still_activates(
    outside_flashinfer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MODE_ENV, raising=False)
    # The hook's own log records, read from a logger of the test's: vLLM's handler (which the real
    # logger() configures) binds the stream of whichever test imported vllm.logger first, so capfd
    # cannot be relied on once another test has done so.
    log = logging.getLogger(f"{LOGGER_NAME}.test-version-checks")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    handler = Said()
    records = handler.records
    log.addHandler(handler)
    monkeypatch.setattr(_activate, "logger", lambda: log)
    try:
        assert _activate.decide() is True
    finally:
        log.removeHandler(handler)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "outside the verified range" in warnings[0] and "0.7.3" in warnings[0]
    infos = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert any("activated for vLLM 0.20.0" in line for line in infos)


def test_outside_flashinfer_is_an_error_when_strict(outside_flashinfer: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODE_ENV, "strict")
    with pytest.raises(_activate.OverlayMismatchError, match=r"0\.7\.3 is outside"):
        _activate.decide()
