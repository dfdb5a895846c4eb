"""What the build tests share: the plan that builds the working tree as it is."""

from __future__ import annotations

from pathlib import Path

from release.core.layout import Layout
from release.overlay.build import BuildPlan


def plan(layout: Layout, out: Path, patch_level: int | None = None) -> BuildPlan:
    """The working tree as it is: on a clean checkout (CI) the clean wheel, on a developer's tree
    with uncommitted hook edits a `.dirty` one of those edits. Refusing a dirty tree is tested
    on its own (tests/overlay/test_dirty_build.py)."""
    return BuildPlan(layout, out, patch_level, allow_dirty=True)


# `publish` of a wheel `plan` built: on a developer's tree that is a `.dirty` build, which publish takes
# only with --allow-dirty (the flag changes nothing for a clean one). The refusal: tests/unit/test_publish_dirty.py.
PUBLISH_BUILT = ("publish", "--allow-dirty")
