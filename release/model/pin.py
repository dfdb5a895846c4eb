"""The upstream pin (vendor/vllm_fused_moe/UPSTREAM.toml): parsed once, written back byte-stably."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from release.core.errors import ConfigError
from release.core.layout import UPSTREAM_SUBTREE
from release.core.parse import load_toml
from release.core.versions import canonical_tag, version_of_tag
from release.model.tree import UpstreamTree

UPSTREAM_SUBTREE_PREFIX = UPSTREAM_SUBTREE + "/"
# tomli-w writes no comments: the file's own are this fixed header.
HEADER = (
    "# Written by `python -m release rebase`; never edit by hand.\n"
    "# The pristine upstream subtree that vendor/ is built from, and each file's sha256.\n"
)

# --------------------------------------------------------------------------- pin


@dataclass(frozen=True)
class Pin:
    """vendor/vllm_fused_moe/UPSTREAM.toml: which upstream the pristine subtree came from."""

    tag: str
    source: str
    subtree: str
    flashinfer: str = ""
    wheel: str = ""
    wheel_sha256: str = ""
    commit: str = ""
    files: dict[str, str] = field(default_factory=dict)

    @property
    def version(self) -> str:
        return version_of_tag(self.tag)

    @classmethod
    def of(cls, upstream: UpstreamTree, source: str, subtree: str = UPSTREAM_SUBTREE) -> Pin:
        """The pin of a pristine tree just read from `source`."""
        return cls(
            tag=upstream.tag,
            source=source,
            subtree=subtree,
            flashinfer=upstream.flashinfer,
            wheel=upstream.wheel,
            wheel_sha256=upstream.wheel_sha256,
            commit=upstream.commit,
            files=upstream.file_hashes(),
        )

    @classmethod
    def load(cls, path: Path) -> Pin:
        data = load_toml(path, error=ConfigError)
        upstream = data.get("upstream")
        files = data.get("files")
        if not isinstance(upstream, dict) or not isinstance(files, dict):
            raise ConfigError(f"{path} needs an [upstream] and a [files] table")
        for key in ("tag", "source", "subtree"):
            if not isinstance(upstream.get(key), str) or not upstream[key]:
                raise ConfigError(f"{path}: [upstream] {key} is missing")
        tag = canonical_tag(upstream["tag"])
        if upstream["tag"] != tag:
            raise ConfigError(f"{path}: [upstream] tag {upstream['tag']!r} must be spelled {tag!r}")
        for name, digest in files.items():
            if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
                raise ConfigError(f"{path}: [files] {name!r} is not a sha256 hex digest")
        return cls(
            tag=upstream["tag"],
            source=upstream["source"],
            subtree=upstream["subtree"],
            flashinfer=upstream.get("flashinfer", ""),
            wheel=upstream.get("wheel", ""),
            wheel_sha256=upstream.get("wheel_sha256", ""),
            commit=upstream.get("commit", ""),
            files=dict(sorted(files.items())),
        )

    def dumps(self) -> str:
        """The file's text: a fixed header, then the tables as tomli-w writes them (strings escaped)."""
        upstream = {
            "tag": self.tag,
            "source": self.source,
            "subtree": self.subtree,
            "flashinfer": self.flashinfer,
            "wheel": self.wheel,
            "wheel_sha256": self.wheel_sha256,
            "commit": self.commit,
        }
        return HEADER + tomli_w.dumps({"upstream": upstream, "files": dict(sorted(self.files.items()))})
