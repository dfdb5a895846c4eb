"""One tag's pristine subtree, in memory, and where it came from (pq/tree.py is pq's git work tree)."""

from __future__ import annotations

from dataclasses import dataclass

from release.core.hashing import sha256_hex


@dataclass
class UpstreamTree:
    """One tag's pristine subtree and where it came from."""

    tag: str
    source: str
    files: dict[str, bytes]
    flashinfer: str = ""
    wheel: str = ""
    wheel_sha256: str = ""
    commit: str = ""
    # True when wheel_sha256 was computed on the whole file the files were read from; False where it
    # is only the index's claim (a lazy read), which may be compared with a record but never recorded.
    wheel_verified: bool = False

    def file_hashes(self) -> dict[str, str]:
        return {name: sha256_hex(data) for name, data in sorted(self.files.items())}
