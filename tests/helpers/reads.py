"""Counting what a command reads: the tests that hold a command to one read of the checkout share it."""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from release.core import files
from release.core.layout import Layout


def count_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[Path]:
    """Every file read through release.core.files from now on (its one reader), by resolved path."""
    reads: Counter[Path] = Counter()
    read_regular = files.read_regular

    def counted(path: Path, *args: Any, **kwargs: Any) -> bytes:
        reads[Path(path).resolve()] += 1
        return read_regular(path, *args, **kwargs)

    monkeypatch.setattr(files, "read_regular", counted)
    return reads


def count_opens(monkeypatch: pytest.MonkeyPatch, suffix: str = ".whl") -> Counter[Path]:
    """Every open of a file named `*suffix` from now on, by resolved path: os.open (release.core.files, the
    one opener of what a command is given) and io.open (zipfile given a path, Path.open, Path.read_bytes).
    A wheel's sha256 and members are read inside an open, so a wheel opened once is read and hashed once."""
    opens: Counter[Path] = Counter()
    os_open, io_open = os.open, io.open

    def note(path: object) -> None:
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith(suffix):
            opens[Path(os.fspath(path)).resolve()] += 1

    def counted_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        note(path)
        return os_open(path, *args, **kwargs)

    def counted_io_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        note(file)
        return io_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", counted_os_open)
    monkeypatch.setattr(io, "open", counted_io_open)
    return opens


def checkout_files(layout: Layout) -> list[Path]:
    """Every file of patches/ (each patch, series, lines.toml, train.toml, the regression tests) and vendor/'s pins."""
    found = [p for p in layout.patches.rglob("*") if p.is_file()]
    return [*found, layout.upstream_toml, layout.verified_toml]


def over_once(reads: Counter[Path], layout: Layout) -> dict[str, int]:
    """The checkout's files a command read more than once, with how often."""
    counted = {p.relative_to(layout.root).as_posix(): reads[p.resolve()] for p in checkout_files(layout)}
    return {path: count for path, count in counted.items() if count > 1}
