"""`check` sees every way vendor/ can differ from pristine + series, and the queue refuses paths that escape.

Each change is made the way an operator (or an attacker) would, on a copy of the project;
`check` must report it by name (exit 1), and a malformed queue is bad input (exit 2, one
line, no traceback).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from helpers import run_release, snapshot
from helpers.bad_patches import ESCAPES, spoiled
from helpers.failure import failed
from helpers.fix import fix_patch
from helpers.synthetic import add_patch
from release.core.errors import MalformedPatchError
from release.model.pin import Pin

VENDOR = "vendor/vllm_fused_moe/prepare_finalize"


def _check_lines(project: Path) -> list[str]:
    result = run_release(project, "check")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout.splitlines()


def test_a_deleted_file_that_a_patch_created_is_reported(project: Path) -> None:
    add_patch(project, "0002-new-module.patch", "our_helper.py", "", "OURS = True\n", "our_helper: a new module")
    assert run_release(project, "check").returncode == 0
    (project / VENDOR / "our_helper.py").unlink()
    lines = _check_lines(project)
    assert len(lines) == 1 and lines[0].startswith("missing") and "our_helper.py" in lines[0], lines
    assert "0002-new-module.patch" in lines[0]


def test_a_mode_change_is_reported(project: Path) -> None:
    path = project / VENDOR / "batched.py"
    path.chmod(0o755)
    lines = _check_lines(project)
    assert lines == [line for line in lines if line.startswith("mode") and "batched.py" in line] and lines


def test_a_file_replaced_by_a_link_to_the_same_bytes_is_reported(project: Path, tmp_path: Path) -> None:
    path = project / VENDOR / "batched.py"
    same = tmp_path / "batched.py"
    same.write_bytes(path.read_bytes())
    path.unlink()
    os.symlink(same, path)
    lines = _check_lines(project)
    assert len(lines) == 1 and lines[0].startswith("symlink") and "batched.py" in lines[0], lines


def test_a_linked_directory_is_reported_and_never_followed(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("print('outside')\n")
    os.symlink(outside, project / VENDOR / "extra", target_is_directory=True)
    lines = _check_lines(project)
    assert len(lines) == 1 and lines[0].startswith("symlink") and "extra" in lines[0], lines


def _patch_with(project: Path, old: str, new: str) -> None:
    path = fix_patch(project)
    path.write_text(spoiled(path.read_text(), old, new))


# One case as processes: every case of ESCAPES goes through `release.cli.main` in one process
# (tests/unit/test_patch_paths.py), since the queue refuses the patch before git or a source.
@pytest.mark.parametrize(("old", "new", "message"), [case for case in ESCAPES if case.id == "dotdot"])
def test_a_patch_path_that_leaves_the_subtree_is_bad_input(project: Path, old: str, new: str, message: str) -> None:
    _patch_with(project, old, new)
    before = snapshot(project)
    head = Pin.load(project / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml").tag
    for command in (["check"], ["rebase", head, "--from", "pypi"]):
        result = run_release(project, *command)
        assert result.returncode == 2, (command, result.stderr)
        error = failed(result)
        assert error.reference == MalformedPatchError.reference and message in error.message, result.stderr
        assert "Traceback" not in result.stderr
    assert snapshot(project) == before


def test_a_removed_line_that_starts_like_a_header_is_not_a_path(project: Path) -> None:
    """Hunk bodies are not headers: removing a line `-- x` gives `--- x`, which is fine."""
    add_patch(project, "0002-dashes.patch", "batched.py", "import torch\n", "-- not a path\nimport torch\n", "add")
    add_patch(project, "0003-dashes.patch", "batched.py", "-- not a path\n", "", "remove it again")
    assert "\n--- not a path\n" in (project / "patches/0003-dashes.patch").read_text()
    result = run_release(project, "check")
    assert result.returncode == 0, result.stdout + result.stderr


# One shape as processes; both through `release.cli.main` in one process: tests/unit/test_checkout_dirs.py.
@pytest.mark.parametrize("shape", ["file"])
def test_patches_not_a_directory_is_one_line_exit_2(project: Path, shape: str) -> None:
    import shutil

    shutil.rmtree(project / "patches")
    if shape == "file":
        (project / "patches").write_text("not a directory\n")
    for command in (
        ["check"],
        ["status"],
        ["rebase", Pin.load(project / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml").tag, "--from", "pypi"],
    ):
        result = run_release(project, *command)
        assert result.returncode == 2, (command, result.stderr)
        assert "patches" in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert "patches" in failed(result).message


def test_check_is_not_fooled_by_a_temp_dir_inside_a_git_work_tree(project: Path, tmp_path: Path) -> None:
    """nox's `session.create_tmp()` points TMPDIR into the clone; `git apply` there once skipped
    every path and `check` then called a clean vendor/ edited (and missed a real edit the other way)."""
    outer = tmp_path / "clone"
    outer.mkdir()
    subprocess.run(["git", "init", "--quiet", str(outer)], check=True)
    temp = outer / ".nox" / "session" / "tmp"
    temp.mkdir(parents=True)
    inside = {"TMPDIR": str(temp)}
    clean = run_release(project, "check", env=inside)
    assert clean.returncode == 0, (clean.stdout, clean.stderr)
    path = project / VENDOR / "flashinfer_nvlink_two_sided.py"
    path.write_text(path.read_text() + "# a hand edit\n")
    edited = run_release(project, "check", env=inside)
    assert edited.returncode == 1 and "flashinfer_nvlink_two_sided.py" in edited.stdout, edited.stdout
