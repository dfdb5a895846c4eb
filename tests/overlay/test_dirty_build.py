"""`build` never ships a tree under a version and commit it is not, unless told to, and then says so.

The checkout is a real git clone of this repository (HEAD), changed the way a person would.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, run_release
from helpers.failure import failed
from helpers.fix import fix_patch
from release.core.errors import DirtyTreeError, OutputNotWritableError

pytestmark = pytest.mark.slow


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    target = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True)
    return target


def _build(root: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_release(root, "build", "--out", str(out), *extra)


def _info(wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as archive:
        info: dict[str, Any] = json.loads(archive.read("vllm_fused_moe/_build_info.json"))
    return info


def _hand_edit(clone: Path) -> str:
    path = clone / "vendor/vllm_fused_moe/prepare_finalize/batched.py"
    path.write_text(path.read_text() + "# hand edit\n")
    return "batched.py"


def _hook_edit(clone: Path) -> str:
    path = clone / "release/overlay/runtime/vllm_fused_moe/_finder.py"
    path.write_text(path.read_text() + "# hand edit\n")
    return "_finder.py"


def _extra_file(clone: Path) -> str:
    (clone / "vendor/vllm_fused_moe/extra.py").write_text("print('not committed')\n")
    return "extra.py"


def _ignored_file(clone: Path) -> str:
    info = clone / "vendor/vllm_fused_moe/junk.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Name: junk\n")
    return "junk.egg-info"


def _patch_edit(clone: Path) -> str:
    path = fix_patch(clone)
    path.write_text(path.read_text().replace("Risk:", "Risk: (edited)", 1))
    return path.name


DIRT = [_hand_edit, _hook_edit, _extra_file, _ignored_file, _patch_edit]


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_a_clean_checkout_builds_clean(clone: Path, tmp_path: Path) -> None:
    """And the level a build records is the one dirt the next build names with its way out: a build writes
    what its wheel ships into patches/train.toml (`shipped`), which must be committed before the next."""
    train = clone / "patches/train.toml"
    train.write_text("".join(s for s in train.read_text().splitlines(True) if not s.startswith("shipped = ")))
    # A checked-in train that already records the head's level leaves nothing to commit here.
    _git(clone, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-am", "no levels")
    result = _build(clone, tmp_path / "dist")
    assert result.returncode == 0, result.stderr
    wheel = next((tmp_path / "dist").glob("*.whl"))
    info = _info(wheel)
    assert info["dirty"] == [] and not info["version"].endswith(".dirty")
    assert info["commit"] == _git(clone, "rev-parse", "HEAD")
    assert "shipped = " in train.read_text()  # the head's level now records what it ships
    again = _build(clone, tmp_path / "dist2")
    assert again.returncode == 2 and "hint: a build recorded new patch levels there: commit patches/train.toml" in (
        again.stderr
    ), again.stderr
    _git(clone, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "levels")
    recorded = train.read_bytes()
    # With ResourceWarning an error (issue 45: the backend worker's answer pipe was left open).
    third = run_release(
        clone, "build", "--out", str(tmp_path / "dist3"), env={"PYTHONWARNINGS": "error::ResourceWarning"}
    )
    assert third.returncode == 0 and train.read_bytes() == recorded, third.stderr  # the same files: no write
    assert "ResourceWarning" not in third.stderr, third.stderr


@pytest.mark.parametrize("dirty", DIRT)
def test_a_dirty_tree_is_refused_with_exit_2(clone: Path, tmp_path: Path, dirty: Callable[[Path], str]) -> None:
    what = dirty(clone)
    result = _build(clone, tmp_path / "dist")
    assert result.returncode == 2, result.stderr
    error = failed(result)
    # What is dirty is the point: the error names it.
    assert error.reference == DirtyTreeError.reference and what in error.message, result.stderr
    assert "--allow-dirty" in error.hint
    assert not (tmp_path / "dist").exists()


def test_allow_dirty_marks_the_version_and_the_build_info(clone: Path, tmp_path: Path) -> None:
    _extra_file(clone)
    _hook_edit(clone)
    result = _build(clone, tmp_path / "dist", "--allow-dirty")
    assert result.returncode == 0, result.stderr
    wheel = next((tmp_path / "dist").glob("*.whl"))
    assert ".dirty-py3" in wheel.name
    info = _info(wheel)
    assert info["version"].endswith(".dirty")
    assert any("extra.py" in reason for reason in info["dirty"])
    assert any("_finder.py" in reason for reason in info["dirty"])


def test_a_link_is_never_built_even_with_allow_dirty(clone: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text("SECRET = 1\n")
    os.symlink(secret, clone / "vendor/vllm_fused_moe/linked.py")
    result = _build(clone, tmp_path / "dist", "--allow-dirty")
    assert result.returncode == 2 and "symbolic link" in result.stderr, result.stderr
    assert not (tmp_path / "dist").exists()


def test_a_dirty_tree_outside_git_is_refused_too(project: Path, tmp_path: Path) -> None:
    _hand_edit(project)
    result = _build(project, tmp_path / "dist")
    assert result.returncode == 2 and "batched.py" in result.stderr, result.stderr


@pytest.mark.parametrize("shape", ["under-a-file", "a-file"])
def test_an_unwritable_out_is_one_line_exit_2_before_building(clone: Path, tmp_path: Path, shape: str) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    out = blocker / "dist" if shape == "under-a-file" else blocker
    result = _build(clone, out)
    assert result.returncode == 2, result.stderr
    error = failed(result)
    assert error.reference == OutputNotWritableError.reference and error.message.startswith("--out "), result.stderr
    assert "Traceback" not in result.stderr
