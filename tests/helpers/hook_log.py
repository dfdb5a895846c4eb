"""What the overlay's hook logs, caught by a logger of the test's own.

The hook's `logger()` would import vllm.logger, whose handler binds the stream of whichever test
configured it first and so hides later tests' output from capfd; a test's own logger, swapped in for
`_activate.logger`, catches each record instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from vllm_fused_moe import _activate


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
    log = logging.getLogger(f"{_activate.LOGGER_NAME}.{name}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    monkeypatch.setattr(_activate, "logger", lambda: log)
    yield handler
    log.removeHandler(handler)
