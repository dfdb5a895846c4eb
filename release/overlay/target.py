"""What `build` is asked (`BuildPlan`), what one wheel is made of (`BuildTarget`), what a build gives
(`BuildResult`), and the version a wheel of a tag and patch level has."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core.errors import BadPatchLevelError
from release.core.layout import Layout
from release.model.lines import HEAD_LINE, Line
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.train import TrainEntry
from release.overlay.backend import Isolation
from release.queue.snapshot import Checkout


@dataclass(frozen=True)
class BuildPlan:
    layout: Layout
    out: Path
    patch_level: int | None = None
    isolation: Isolation = Isolation.AUTO
    allow_dirty: bool = False  # build a tree that is not its commit; the version and build info say so


@dataclass(frozen=True)
class BuildTarget:
    """What one wheel is made of: a tag's pin, its FlashInfer range and its patched subtree."""

    pin: Pin
    # The PEP 440 range the wheel requires: the pin ∩ VERIFIED.toml; "" where no patch relies on FlashInfer.
    flashinfer: str
    line: Line  # the tag's release line; its modules are what the wheel serves
    patches: tuple[Patch, ...]  # what the tag carries, in series order
    series: str  # the text of the line's series file, which the wheel ships
    subtree: dict[str, bytes] | None = None  # None: vendor/ as it is (the head)
    entry: TrainEntry | None = None  # its entry in patches/train.toml (None: none): its level, what that shipped


def head_target(checkout: Checkout, flashinfer: str, entry: TrainEntry | None = None) -> BuildTarget:
    """The head's wheel, from vendor/ and patches/series as the command read them."""
    line = checkout.line(entry.line if entry is not None else HEAD_LINE)
    patches = tuple(checkout.queue.patches)
    return BuildTarget(checkout.queue.pin, flashinfer, line, patches, checkout.series_text(line), None, entry)


@dataclass(frozen=True)
class BuildResult:
    tag: str
    wheel: Path
    sha256: str
    size: int
    seconds: float
    version: str
    source_date_epoch: int
    isolated: bool
    entry: TrainEntry | None = None  # the tag's entry as this build leaves it: its level and what that level ships


def overlay_version(vllm_version: str, patch_level: int, dirty: bool = False) -> str:
    """`0.20.0+fm.1`: vLLM's version, then our patch level as a PEP 440 local label.

    A local label is PEP 440's word for "upstream's release plus downstream patches". Its
    number is a separate dot segment so it compares as an integer (fm.10 > fm.9; fm10 < fm9).
    A build of a tree that is not its commit (`--allow-dirty`) ends in `.dirty`.
    """
    if patch_level < 1:
        raise BadPatchLevelError(f"patch level {patch_level} is not a positive integer")
    return f"{vllm_version}+fm.{patch_level}" + (".dirty" if dirty else "")
