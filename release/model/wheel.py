"""A wheel as one read of its file gives it (release/overlay/wheel.py reads it): the one set of facts the fix
gate, the evidence, the index plan and the index writer take, so that none of them opens or hashes it again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.core.versions import Pep440Version


@dataclass(frozen=True)
class OverlayWheel:
    """A wheel as one read of its file gives it: every fact the fix gate, the evidence, the index plan and the
    index writer ask, so that no stage opens or hashes the file again."""

    path: Path
    project: str  # PEP 503 normalised name
    version: Pep440Version
    sha256: str
    requires_python: str
    metadata_version: str = ""  # the Version header as written, which METADATA repeats in its text
    members: tuple[str, ...] = ()
    # _build_info.json (None: a wheel without it, not one of ours, or one we cannot read: nothing to judge).
    build_info: dict[str, Any] | None = None
    # What it installs apart from its build information (release.overlay.shipped); "" for another project's.
    shipped: str = ""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def vllm(self) -> str:
        """The vLLM release an overlay wheel is for: its version without our `+fm.N` label."""
        return self.version.public

    @property
    def tag(self) -> str | None:
        """The vLLM tag the wheel was built for, from its build facts (read_wheel held its file name to them);
        None for a wheel without build facts."""
        info = self.build_info
        return str(info["vllm_tag"]) if info is not None and isinstance(info.get("vllm_tag"), str) else None
