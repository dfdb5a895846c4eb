"""The FlashInfer versions our tests verified (vendor/vllm_fused_moe/VERIFIED.toml)."""

from __future__ import annotations

import tomllib

from release.errors import ConfigError
from release.layout import Layout


def verified_specifier(layout: Layout) -> str:
    try:
        data = tomllib.loads(layout.verified_toml.read_text(encoding="utf-8"))
        return str(data["flashinfer-python"]["specifier"])
    except (FileNotFoundError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{layout.verified_toml} has no [flashinfer-python] specifier ({exc})") from None
