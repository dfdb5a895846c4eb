"""The doctor reports the hook's decision through `_activate.activation()`; `decide()` acts on it.

For every mode, vLLM version and FlashInfer version, the pure function and the hook agree: the hook
activates exactly when `activation()` says so, raises (strict) exactly when it says no, and logs
its reason.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "vendor"))
from vllm_fused_moe import _activate

INFO = {
    "version": "0.20.0+fm.1",
    "vllm_tag": "v0.20.0",
    "vllm_version": "0.20.0",
    "flashinfer_specifier": "==0.6.8.post1",
    "patches": [{"name": "0001-x.patch"}],
}


class Said(logging.Handler):
    """What the hook logged, wherever vLLM's logging configuration sends it (it does not propagate)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Iterator[Said]:
    # A logger of the test's own: the hook's logger() would import vllm.logger, whose handler binds
    # the stream of whichever test configured it first and so hides later tests' output from capfd.
    handler = Said()
    log = logging.getLogger(f"{_activate.LOGGER_NAME}.test-decision")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    monkeypatch.setattr(_activate, "logger", lambda: log)
    yield handler
    log.removeHandler(handler)


@pytest.mark.parametrize("mode", ["", "on", "off", "strict", "0", "bogus"])
@pytest.mark.parametrize("vllm", ["0.20.0", "0.20.0+cu129", "0.21.0"])
@pytest.mark.parametrize("flashinfer", [None, "0.6.8.post1", "0.7.3"])
def test_activation_is_what_decide_does(
    mode: str, vllm: str, flashinfer: str | None, monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    monkeypatch.setattr(_activate._meta, "load", lambda: INFO)
    monkeypatch.setattr(_activate, "installed_vllm_version", lambda: vllm)
    monkeypatch.setattr(_activate, "flashinfer_version", lambda: flashinfer)
    monkeypatch.setenv(_activate.MODE_ENV, mode)
    active, reason = _activate.activation(INFO, _activate.mode(), vllm, flashinfer)
    if not active and _activate.mode() == "strict":
        with pytest.raises(_activate.OverlayMismatchError, match="strict") as raised:
            _activate.decide()
        text = str(raised.value)
    else:
        assert _activate.decide() is active
        text = "\n".join(said.lines)
    if reason:
        assert reason in text
    assert (reason is None) is (active and flashinfer != "0.7.3")
    assert active is (
        mode not in ("off", "0") and vllm != "0.21.0" and not (mode == "strict" and flashinfer == "0.7.3")
    )
