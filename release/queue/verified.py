"""The FlashInfer versions our tests verified (vendor/vllm_fused_moe/VERIFIED.toml).

The one reader of that file for the tooling, the contract suite and the kernel probe;
reading it is stdlib only, so the probe can use it on a GPU machine that has nothing else
of ours (the range arithmetic below imports `packaging`, which the tooling always has).

The model is a list: each version a test actually ran against, with how. A train tag's
wheel accepts the versions that are both allowed by that tag's own pin (vLLM's
Requires-Dist on flashinfer-python) and verified; when none is, that tag is not built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.core.errors import ConfigError, UnverifiedFlashInferError
from release.core.layout import Layout
from release.core.parse import load_toml


@dataclass(frozen=True)
class VerifiedVersion:
    version: str
    how: str  # which suites ran against it, and where


@dataclass(frozen=True)
class VerifiedFlashInfer:
    entries: tuple[VerifiedVersion, ...]

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(entry.version for entry in self.entries)

    @property
    def specifier(self) -> str:
        """The narrowest PEP 440 range holding every verified version (a summary; see `range_for`)."""
        ordered = _sorted_versions(self.versions)
        if len(ordered) == 1:
            return f"=={ordered[0]}"
        return f">={ordered[0]},<={ordered[-1]}" if ordered else ""

    def range_for(self, pin: str) -> str | None:
        """The flashinfer-python specifier for a tag whose vLLM pins `pin`, or None if no verified
        version satisfies it.

        `pin` is vLLM's requirement ("flashinfer-python==0.6.6"); "" means the source did not say,
        and then every verified version is allowed. One version gives `==V`; several give the pin
        narrowed to the span of the verified versions inside it.
        """
        try:
            allowed = Requirement(pin).specifier if pin else SpecifierSet()
        except InvalidRequirement:
            raise ConfigError(f"the FlashInfer pin {pin!r} is not a PEP 508 requirement") from None
        inside = _sorted_versions([v for v in self.versions if allowed.contains(v, prereleases=True)])
        if not inside:
            return None
        if len(inside) == 1:
            return f"=={inside[0]}"
        return str(allowed & SpecifierSet(f">={inside[0]},<={inside[-1]}"))


def _sorted_versions(versions: list[str] | tuple[str, ...]) -> list[str]:
    return sorted(versions, key=Version)


def read_verified(path: Path) -> VerifiedFlashInfer:
    try:
        table = load_toml(path, error=ConfigError)["flashinfer-python"]
        entries = tuple(VerifiedVersion(str(entry["version"]), str(entry["how"])) for entry in table["verified"])
    except (KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path} has no valid [flashinfer-python] table ({exc!r})",
            hint='VERIFIED.toml lists `verified = [{ version = "X", how = "..." }, ...]` under [flashinfer-python]',
        ) from None
    if not entries:
        raise ConfigError(f"{path}: [flashinfer-python] verified is empty; no wheel could be built")
    return VerifiedFlashInfer(entries)


def flashinfer_range(layout: Layout, tag: str, pin: str) -> str:
    """The flashinfer-python range of `tag`'s wheel: its pin ∩ what we verified; refused when empty."""
    verified = read_verified(layout.verified_toml)
    found = verified.range_for(pin)
    if found is None:
        raise UnverifiedFlashInferError(
            f"{tag}: vLLM pins {pin}, and no verified FlashInfer satisfies it "
            f"(verified: {', '.join(verified.versions)}); not building an overlay that could not be installed "
            "beside it, or that would run on an unverified combine"
        )
    return found


def verified_versions_text(layout: Layout) -> str:
    """Every verified version, for reports: "0.6.6, 0.6.8.post1"."""
    return ", ".join(_sorted_versions(read_verified(layout.verified_toml).versions))
