"""publish puts nothing into the index that is not on disk first.

Each file it renames into place (wheels, project pages, the root page, requirements files) was
fsynced under its temporary name before the rename, and each directory that got a rename was synced
after it: a power cut leaves the old index or the new one, never a page that names a file the disk
does not hold. fsync and rename are watched (not replaced): the real calls still run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.synthetic import demo_wheel
from release.overlay.index import publish


def test_every_file_publish_renames_into_place_was_synced_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files: list[str] = []
    directories: list[str] = []
    renamed: list[Path] = []
    real_fsync, real_replace = os.fsync, Path.replace

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        (directories if os.path.isdir(path) else files).append(path)
        real_fsync(fd)

    def replace(self: Path, target: str | os.PathLike[str]) -> Path:
        assert str(self) in files, f"{self.name} renamed to {Path(target).name} before it was on disk"
        renamed.append(Path(target))
        return real_replace(self, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Path, "replace", replace)
    index = tmp_path / "index"
    wheels = [demo_wheel(tmp_path / "dist", "1.0")]
    publish(wheels, index)
    wheels.append(demo_wheel(tmp_path / "dist", "1.1"))
    publish(wheels, index)  # the second run rewrites the pages that the first wrote

    simple = index / "simple"
    project = simple / "vllm-fused-moe"
    assert {path.relative_to(index).as_posix() for path in renamed} >= {
        "simple/index.html",
        "simple/vllm-fused-moe/index.html",
        "simple/vllm-fused-moe/vllm_fused_moe-1.0-py3-none-any.whl",
        "simple/vllm-fused-moe/vllm_fused_moe-1.1-py3-none-any.whl",
    }
    assert {str(project), str(simple)} <= set(directories)
