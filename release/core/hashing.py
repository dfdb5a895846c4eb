"""sha256 of bytes and of files; one place so the index, the pin and the train agree."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file read in blocks: release wheels are ~240 MB."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def code_digest(root: Path, files: list[Path]) -> str:
    """sha256 over the given files of our own code, each named by its path below `root`: a cache key's part that
    changes with the code that made the entry (the evidence stage's runs and proofs, a tag's kept replay)."""
    rows = [f"{path.relative_to(root).as_posix()}\0{file_sha256(path)}" for path in sorted(files)]
    return sha256_hex("\n".join(rows).encode())
