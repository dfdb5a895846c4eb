"""The FlashInfer versions our tests verified (vendor/vllm_fused_moe/VERIFIED.toml).

The one reader of that file for the tooling, the contract suite and the kernel probe;
stdlib only, so the probe can use it on a GPU machine that has nothing else of ours.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import ConfigError
from release.core.layout import Layout


@dataclass(frozen=True)
class VerifiedFlashInfer:
    specifier: str  # PEP 440, the range the overlay accepts without a warning
    versions: tuple[str, ...]  # the versions a test actually ran against


def read_verified(path: Path) -> VerifiedFlashInfer:
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))["flashinfer-python"]
        return VerifiedFlashInfer(
            str(table["specifier"]), tuple(str(entry["version"]) for entry in table.get("verified", []))
        )
    except (FileNotFoundError, KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path} has no valid [flashinfer-python] table ({exc!r})") from None


def verified_specifier(layout: Layout) -> str:
    return read_verified(layout.verified_toml).specifier
