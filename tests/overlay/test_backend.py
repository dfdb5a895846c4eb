"""One backend process for every wheel of a command gives the bytes PyPA `build` gave, one process per wheel.

The head's package is staged once (release.overlay.stage.stage_package, as `build` stages it) and built
by PyPA `build --no-isolation` (its own process, and pyproject_hooks' hook process) and by
release.overlay.backend.Backend (one worker for many wheels): the sha256 must be one. Real hatchling,
real processes; two wheels, about two seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import REPO
from release.core.errors import BuildError
from release.core.hashing import file_sha256
from release.core.layout import Layout
from release.overlay.backend import BACKEND_VERSION, Backend, installed_backend, run_backend
from release.overlay.stage import stage_package
from release.overlay.target import head_target
from release.queue.snapshot import Checkout

EPOCH = 1_700_000_000

pytestmark = pytest.mark.skipif(
    installed_backend() != BACKEND_VERSION, reason=f"the pinned hatchling {BACKEND_VERSION} is not installed"
)


def staged(tmp_path: Path) -> Path:
    layout = Layout(REPO)
    checkout = Checkout.load(layout)
    target = head_target(checkout, "")
    stage = tmp_path / "src"
    stage_package(layout, stage, f"{target.pin.version}+fm.1", target, list(target.patches), EPOCH, [])
    return stage


def test_one_backend_process_gives_the_bytes_pypa_build_gives(tmp_path: Path) -> None:
    stage = staged(tmp_path)
    by_build = run_backend(stage, tmp_path / "by-build", EPOCH, isolated=False)
    with Backend(isolated=False, epoch=EPOCH) as backend:
        first = backend.build(stage, tmp_path / "by-worker-1")
        second = backend.build(stage, tmp_path / "by-worker-2")  # the same process, a second wheel
    assert first.name == by_build.name
    assert file_sha256(first) == file_sha256(second) == file_sha256(by_build)


def test_a_package_the_backend_refuses_is_a_build_error_with_its_words(tmp_path: Path) -> None:
    stage = staged(tmp_path)
    (stage / "pyproject.toml").write_text(
        (stage / "pyproject.toml").read_text().replace('version = "', 'version = "not a version '), encoding="utf-8"
    )
    with Backend(isolated=False, epoch=EPOCH) as backend, pytest.raises(BuildError, match="could not build"):
        backend.build(stage, tmp_path / "out")
