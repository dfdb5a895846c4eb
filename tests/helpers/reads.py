"""Counting what a command reads: the tests that hold a command to one read of the checkout share it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from release.core import files


def count_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[Path]:
    """Every file read through release.core.files from now on (its one reader), by resolved path."""
    reads: Counter[Path] = Counter()
    read_regular = files.read_regular

    def counted(path: Path, *args: Any, **kwargs: Any) -> bytes:
        reads[Path(path).resolve()] += 1
        return read_regular(path, *args, **kwargs)

    monkeypatch.setattr(files, "read_regular", counted)
    return reads
