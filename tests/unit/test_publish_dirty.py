"""publish refuses a dirty build unless told: `build --allow-dirty` makes X+fm.N.dirty, which sorts above
the clean X+fm.N, so the requirements file of release X would pin it for every user who installs."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from helpers import REPO, snapshot
from helpers.failure import failed
from helpers.synthetic import demo_wheel
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, DirtyWheelError
from release.overlay.build import PROJECT
from release.overlay.index import publish
from release.overlay.wheel import is_dirty


@pytest.mark.parametrize(
    "version, dirty",
    [("1.2.3+fm.1.dirty", True), ("1.2.3+fm.1", False), ("1.2.3", False), ("1.2.3+dirty.fm.1", False)],
)
def test_a_dirty_version_is_the_one_build_allow_dirty_makes(version: str, dirty: bool) -> None:
    assert is_dirty(Version(version)) is dirty


def test_publish_refuses_a_dirty_build_and_takes_it_with_allow_dirty(tmp_path: Path) -> None:
    """The index stage's refusal, which the command makes before its other gates (a demo wheel is no build of the
    checkout: the command would refuse it for that too, tests/cli/test_publish_rebuild.py)."""
    clean = demo_wheel(tmp_path / "dist", "1.2.3+fm.1")
    index = tmp_path / "index"
    publish([clean], index, project=PROJECT)
    before = snapshot(index)
    dirty = demo_wheel(tmp_path / "dirty", "1.2.3+fm.1.dirty")

    with pytest.raises(DirtyWheelError) as refused:
        publish([dirty], index, project=PROJECT)
    assert str(refused.value).startswith(f"{dirty.name} ") and refused.value.exit_code == EXIT_BAD_INPUT
    assert "--allow-dirty" in refused.value.hint  # the hint says how to take it anyway
    assert snapshot(index) == before

    publish([dirty], index, project=PROJECT, allow_dirty=True)
    assert (index / "simple" / "vllm-fused-moe" / dirty.name).read_bytes() == dirty.read_bytes()


def test_the_command_refuses_a_dirty_build_before_anything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirty = demo_wheel(tmp_path / "dirty", "1.2.3+fm.1.dirty")
    assert main(["--root", str(REPO), "publish", str(dirty), str(tmp_path / "index")]) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == DirtyWheelError.reference and error.message.startswith(f"{dirty.name} ")
    assert not (tmp_path / "index").exists()
