"""The FlashInfer versions whose top-k reduction was verified (vendor/vllm_fused_moe/VERIFIED.toml)."""

import tomllib
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from .paths import VERIFIED_TOML


@dataclass(frozen=True)
class VerifiedFlashInfer:
    specifier: SpecifierSet
    versions: tuple[str, ...]


def read_verified_flashinfer() -> VerifiedFlashInfer:
    with VERIFIED_TOML.open("rb") as f:
        table = tomllib.load(f)["flashinfer-python"]
    return VerifiedFlashInfer(
        specifier=SpecifierSet(table["specifier"]),
        versions=tuple(entry["version"] for entry in table["verified"]),
    )
