"""One wheel of one target: staged, built by the backend (one process for every wheel of a command), and
built again one level up when the files it ships differ from those its level shipped.

Hatchling writes reproducible wheels (sorted entries, normalised modes, zip times from SOURCE_DATE_EPOCH),
and SOURCE_DATE_EPOCH comes from the commit, so two builds of one commit are byte-identical."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from release.core.errors import BadInputError
from release.core.git import commit_time
from release.model.patch import Patch
from release.overlay.backend import Backend, use_isolation
from release.overlay.project import ZIP_EPOCH
from release.overlay.stage import stage_package
from release.overlay.target import BuildPlan, BuildResult, BuildTarget, overlay_version
from release.overlay.wheel import read_wheel


def backend_for(plan: BuildPlan) -> Backend:
    """The backend every wheel of this command is built by (one process without isolation)."""
    return Backend(use_isolation(plan.isolation), source_date_epoch(plan.layout.root))


def source_date_epoch(root: Path) -> int:
    """SOURCE_DATE_EPOCH if the caller set it, else the commit time of HEAD."""
    configured = os.environ.get("SOURCE_DATE_EPOCH")
    if configured:
        try:
            return max(int(configured), ZIP_EPOCH)
        except ValueError:
            raise BadInputError(f"SOURCE_DATE_EPOCH={configured!r} is not an integer") from None
    committed = commit_time(root)
    return max(committed, ZIP_EPOCH) if committed is not None else ZIP_EPOCH


def build_target(
    plan: BuildPlan, target: BuildTarget, scratch: Path, dirty: list[str], backend: Backend
) -> BuildResult:
    """One wheel in `scratch`; `dirty` (from checked_inputs) marks the version and the build info."""
    started = time.perf_counter()
    patches = list(target.patches)
    # --patch-level, else the tag's level in patches/train.toml, else (a tag the train does not hold) the
    # number of patches it carries.
    entry = target.entry
    level = plan.patch_level if plan.patch_level is not None else (entry.patch_level if entry else max(len(patches), 1))
    version, built = _build_at(plan, target, scratch, patches, level, backend, dirty)
    wheel = read_wheel(built)  # once: its sha256 and what it ships
    if entry is not None and not dirty:
        # The level follows the bytes the wheel ships: files other than those its level shipped go one level
        # up (built again at it: the version is inside the wheel); a dirty build's version says .dirty instead.
        entry = entry.shipped_at(wheel.shipped, plan.patch_level)
        if entry.patch_level != level:
            version, built = _build_at(plan, target, scratch, patches, entry.patch_level, backend, dirty)
            wheel = read_wheel(built)
    return BuildResult(
        target.pin.tag,
        built,
        wheel.sha256,
        built.stat().st_size,
        time.perf_counter() - started,
        version,
        backend.epoch,
        backend.isolated,
        entry if entry is not None and not dirty else None,
    )


def _build_at(
    plan: BuildPlan,
    target: BuildTarget,
    scratch: Path,
    patches: list[Patch],
    level: int,
    backend: Backend,
    dirty: list[str],
) -> tuple[str, Path]:
    """The wheel of `target` at patch `level`, staged and built under `scratch` (replacing an earlier try)."""
    version = overlay_version(target.pin.version, level, dirty=bool(dirty))
    shutil.rmtree(scratch / "src", ignore_errors=True)
    shutil.rmtree(scratch / "dist", ignore_errors=True)
    stage_package(plan.layout, scratch / "src", version, target, patches, backend.epoch, dirty)
    return version, backend.build(scratch / "src", scratch / "dist")
