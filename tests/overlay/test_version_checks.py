"""The overlay's version decisions, called directly (the fresh-venv tests cover the wiring).

The fresh venvs only ever hold the verified FlashInfer, so the out-of-range warning and
its strict error are checked here on the real functions, with the installed version
given as an argument or read from a monkeypatched metadata lookup.
"""

from __future__ import annotations

import pytest

from vllm_fused_moe import _activate

INFO = {
    "version": "0.20.0+fm.1",
    "vllm_tag": "v0.20.0",
    "vllm_version": "0.20.0",
    "flashinfer_specifier": "==0.6.8.post1",
    "patches": [{"name": "0001-x.patch"}],
}


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
    assert (found is None) if problem is None else (problem in found)


@pytest.mark.parametrize(
    "installed, ok", [("0.20.0", True), ("0.20.0+cu129", True), ("0.21.0", False), ("0.20.1", False)]
)
def test_vllm_version(installed: str, ok: bool) -> None:
    assert (_activate.vllm_problem(INFO, installed) is None) is ok


@pytest.fixture
def outside_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_activate._meta, "load", lambda: INFO)
    monkeypatch.setattr(_activate, "installed_vllm_version", lambda: "0.20.0")
    monkeypatch.setattr(_activate, "flashinfer_version", lambda: "0.7.3")


def test_outside_flashinfer_warns_and_still_activates(
    outside_flashinfer: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(_activate.MODE_ENV, raising=False)
    assert _activate.decide() is True
    # vLLM's logging config does not propagate to the root logger: read what it printed.
    printed = capfd.readouterr()
    lines = (printed.out + printed.err).splitlines()
    warnings = [line for line in lines if "WARNING" in line and "outside the verified range" in line]
    assert len(warnings) == 1 and "flashinfer-python 0.7.3" in warnings[0]
    assert any("INFO" in line and "activated for vLLM 0.20.0" in line for line in lines)


def test_outside_flashinfer_is_an_error_when_strict(outside_flashinfer: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_activate.MODE_ENV, "strict")
    with pytest.raises(_activate.OverlayMismatchError, match=r"0\.7\.3 is outside"):
        _activate.decide()
