"""What the build tests share: the plan that builds the working tree as it is, and every train tag's wheel."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from helpers.shared import made_once, run_temp
from helpers.train import load_train
from release.core.layout import Layout
from release.overlay.target import BuildPlan
from release.overlay.train_build import build_train
from release.queue.verified import read_verified


def plan(layout: Layout, out: Path, patch_level: int | None = None) -> BuildPlan:
    """The working tree as it is: on a clean checkout (CI) the clean wheel, on a developer's tree
    with uncommitted hook edits a `.dirty` one of those edits. Refusing a dirty tree is tested
    on its own (tests/overlay/test_dirty_build.py)."""
    return BuildPlan(layout, out, patch_level, allow_dirty=True)


# `publish` of a wheel `plan` built: on a developer's tree that is a `.dirty` build, which publish takes
# only with --allow-dirty (the flag changes nothing for a clean one). The refusal: tests/unit/test_publish_dirty.py.
PUBLISH_BUILT = ("publish", "--allow-dirty")


def buildable_tags(layout: Layout) -> list[str]:
    """The train's tags whose pin admits a verified FlashInfer (VERIFIED.toml): the ones `build` makes a wheel for."""
    verified = read_verified(layout.verified_toml)
    return [e.tag for e in load_train(layout).entries if verified.range_for(e.flashinfer) is not None]


def train_wheels(factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{tag: wheel} of every buildable train tag, built from the working tree as `build --all` builds it.

    Built once per run, on whichever worker asks first (helpers.shared), and read by every file that
    needs the whole train's wheels (tests/overlay/test_pick_wheel.py publishes them,
    tests/overlay/test_build_train.py compares them with its own build by the CLI): never written to.
    """
    layout = Layout.default()
    tags = buildable_tags(layout)

    def make(directory: Path) -> None:
        build_train(plan(layout, directory), tags)

    out = made_once(run_temp(factory), "train-wheels", make)
    found = {"v" + Version(version_of(wheel)).public: wheel for wheel in sorted(out.glob("*.whl"))}
    assert sorted(found) == sorted(tags), (sorted(found), tags)
    return found


def version_of(wheel: Path) -> str:
    """A wheel's version, from its file name (vllm_fused_moe-0.20.2+fm.1-py3-none-any.whl: 0.20.2+fm.1)."""
    return wheel.name.split("-")[1]
