"""Fixtures of the GSM8K smoke tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for path in (REPO_ROOT, HERE):  # `release` is the repo's tooling package (not installed); helpers sit here
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from gsm8k_helpers import write_tiny_data  # noqa: E402


@pytest.fixture()
def tiny_data(tmp_path: Path) -> Path:
    return write_tiny_data(tmp_path / "gsm8k")
