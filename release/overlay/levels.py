"""The patch levels a build writes back into patches/train.toml: each built tag's level and what it ships."""

from __future__ import annotations

from dataclasses import replace

from release.core import log
from release.core.journal import write_atomic
from release.model.train import Train
from release.overlay.target import BuildPlan, BuildResult


def record_levels(plan: BuildPlan, results: list[BuildResult], train: Train | None) -> None:
    """Record in patches/train.toml each built tag's level and what it ships, in one rename; nothing when every
    tag's record is already that (a rebuild of the same files writes nothing), nor for an --allow-dirty build
    (a build for a look, never for an index users install from: the checkout is only read). `train`: the train
    as the command read it under its lock (None: the checkout has none)."""
    layout = plan.layout
    if plan.allow_dirty or train is None:
        return
    changed = train
    for result in results:
        now = changed.get(result.tag)
        if (
            result.entry is not None
            and now is not None
            and (now.level, now.shipped)
            != (
                result.entry.patch_level,
                result.entry.shipped,
            )
        ):
            raised = now.patch_level != result.entry.patch_level
            changed = changed.with_entry(replace(now, level=result.entry.patch_level, shipped=result.entry.shipped))
            if raised:
                log.out(
                    f"{result.tag}: patch level {result.entry.patch_level} (was {now.patch_level}: its wheel ships "
                    "other files); recorded in patches/train.toml"
                )
    if changed != train:
        write_atomic(layout.train, changed.dumps().encode("utf-8"))
