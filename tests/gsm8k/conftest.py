"""Fixtures of the GSM8K smoke tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.gsm8k import write_tiny_data


@pytest.fixture()
def tiny_data(tmp_path: Path) -> Path:
    return write_tiny_data(tmp_path / "gsm8k")
