"""What the overlay's hook logs, caught by a logger of the test's own.

The hook's `logger()` would import vllm.logger, whose handler binds the stream of whichever test
configured it first and so hides later tests' output from capfd; a test's own logger, swapped in for
`_activate.logger`, catches each record instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from helpers.build_facts import INFO
from release.core.layout import Layout
from vllm_fused_moe import _activate, _meta
from vllm_fused_moe._finder import LOGGER_NAME


class Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def lines(self) -> list[str]:
        return [record.getMessage() for record in self.records]


def own_logger(monkeypatch: pytest.MonkeyPatch, name: str) -> Iterator[Said]:
    """Swap `_activate.logger` for a logger named `name` (under the hook's) that keeps every record."""
    handler = Said()
    log = logging.getLogger(f"{LOGGER_NAME}.{name}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    monkeypatch.setattr(_activate, "logger", lambda: log)
    yield handler
    log.removeHandler(handler)


def hook_sees(monkeypatch: pytest.MonkeyPatch, vllm: str | None = None, flashinfer: str | None = None) -> None:
    """The hook's view of an environment, for a test of its decision: the build facts of a wheel (INFO, whose
    vLLM release is `vllm`'s default), vendor/'s files as the package beside them (as in the wheel; the
    package's source folder, release/overlay/runtime/vllm_fused_moe/, holds only our code), and the vLLM and
    FlashInfer versions it finds installed (None: no FlashInfer)."""
    seen = INFO["vllm_version"] if vllm is None else vllm
    monkeypatch.setattr(_meta, "load", lambda: INFO)
    monkeypatch.setattr(_meta, "HERE", Layout.default().vendored)
    monkeypatch.setattr(_activate, "installed_vllm_version", lambda: seen)
    monkeypatch.setattr(_activate, "flashinfer_version", lambda: flashinfer)
