"""The FlashInfer versions whose top-k reduction was verified, as the contract tests use them."""

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from release.queue.verified import read_verified

from .paths import VERIFIED_TOML


@dataclass(frozen=True)
class VerifiedFlashInfer:
    specifier: SpecifierSet
    versions: tuple[str, ...]


def read_verified_flashinfer() -> VerifiedFlashInfer:
    verified = read_verified(VERIFIED_TOML)
    return VerifiedFlashInfer(specifier=SpecifierSet(verified.specifier), versions=verified.versions)
