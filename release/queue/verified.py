"""The FlashInfer versions our tests verified (vendor/vllm_fused_moe/VERIFIED.toml).

The one reader of that file for the tooling, the contract suite and the kernel probe;
reading it is stdlib only, so the probe can use it on a GPU machine that has nothing else
of ours (the range arithmetic below imports `packaging`, which the tooling always has).

The model is a list: each version a test actually ran against, with how. It is the contract of
the patches whose `Depends-On:` trailer names flashinfer-python (0001: the combine sums over
top-k), not of every wheel: a wheel that carries such a patch accepts the versions that are both
allowed by its tag's own pin (vLLM's Requires-Dist on flashinfer-python) and verified, and when
none is, that tag is not built; a wheel whose patches rely on nothing of FlashInfer asks nothing
of it (vLLM's own pin stands).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from release.core.errors import ConfigError, UnverifiedFlashInferError
from release.core.layout import Layout
from release.core.parse import load_toml
from release.core.versions import package_version

if TYPE_CHECKING:  # only its attributes are read: the probe's import of this module stays light
    from release.model.patch import Patch

# The distribution VERIFIED.toml verifies, as a patch's `Depends-On:` names it.
FLASHINFER = "flashinfer-python"
_NAMES_FLASHINFER = re.compile(rf"(?<![\w.-]){re.escape(FLASHINFER)}(?![\w.-])", re.I)


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
    return sorted(versions, key=package_version)


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


def relying_on_flashinfer(patches: Iterable[Patch]) -> list[str]:
    """The names of the patches whose `Depends-On:` names flashinfer-python: VERIFIED.toml is their contract."""
    return [p.name for p in patches if _NAMES_FLASHINFER.search(p.depends_on)]


def wheel_range(verified: VerifiedFlashInfer, pin: str, patches: Iterable[Patch]) -> str | None:
    """The flashinfer-python range of a wheel that carries `patches` for a tag whose vLLM pins `pin`.

    One of them relies on FlashInfer: `range_for(pin)` (None: no verified version fits, no wheel).
    None does: "" (the wheel requires nothing of FlashInfer; vLLM's own pin stands).
    """
    return verified.range_for(pin) if relying_on_flashinfer(patches) else ""


def unverified_reason(tag: str, pin: str, verified: VerifiedFlashInfer, patches: Iterable[Patch]) -> str:
    """Why `tag`'s wheel cannot be built (wheel_range gave None): its pin, the patches that rely on FlashInfer."""
    relying = ", ".join(relying_on_flashinfer(patches))
    return (
        f"{tag} pins {pin or 'no flashinfer-python'}: no verified FlashInfer satisfies it "
        f"(verified: {', '.join(verified.versions)}), and {relying} relies on FlashInfer (its Depends-On)"
    )


def flashinfer_range(verified: VerifiedFlashInfer, tag: str, pin: str, patches: Iterable[Patch]) -> str:
    """The flashinfer-python range of `tag`'s wheel (wheel_range); refused when no verified version fits."""
    carried = list(patches)
    found = wheel_range(verified, pin, carried)
    if found is None:
        raise UnverifiedFlashInferError(
            unverified_reason(tag, pin, verified, carried)
            + "; not building an overlay that could not be installed beside it, or that would run on an "
            "unverified combine"
        )
    return found


def verified_versions_text(layout: Layout) -> str:
    """Every verified version, for reports: "0.6.6, 0.6.8.post1"."""
    return ", ".join(_sorted_versions(read_verified(layout.verified_toml).versions))
