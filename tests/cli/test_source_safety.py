"""No source is trusted: every kind refuses names, links and versions that would escape or lie.

Each attack is a real archive, tree or git repository built here from vLLM's own files
(tests/helpers/synthetic.py), fed to the real CLI. Each must end in exit 2 with one error line,
vendor/ and patches/ byte for byte as before, no work directory left, and nothing written
outside the checkout. A well-formed source of each kind goes through, so a refusal is
about the attack, not about the synthetic source.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import run_release, snapshot, unsafe_sources, work_leftovers
from helpers.failure import failed
from helpers.index_server import LoopbackIndex
from helpers.synthetic import NEXT_TAG, SUBTREE, make_git, next_tree
from helpers.unsafe_sources import OTHER_VERSION, VERSION
from release.core import errors
from release.core.errors import BadInputError, UnknownTagError
from release.core.git import WorkRepo
from release.model.pin import Pin
from release.pristine.index import INDEX_ENV


def wheel_source(kind: str, project: Path, tmp: Path) -> str:
    return unsafe_sources.wheel_source(kind, next_tree(project), tmp)


def dir_source(kind: str, project: Path, tmp: Path) -> str:
    return unsafe_sources.dir_source(kind, next_tree(project), tmp)


def git_source(kind: str, project: Path, tmp: Path) -> str:
    path = make_git(tmp / "vllm-git", {NEXT_TAG: next_tree(project)})
    repo = WorkRepo(path)
    if kind == "symlink":
        (path / SUBTREE / "secret.py").symlink_to("/etc/passwd")
        repo.run("add", SUBTREE)
    elif kind == "submodule":
        head = repo.head()
        repo.run("update-index", "--add", "--cacheinfo", f"160000,{head},{SUBTREE}/vendored_module")
    if kind != "good":
        repo.run("commit", "--quiet", "-m", f"{kind} in the subtree")
        repo.run("tag", "-f", NEXT_TAG)
    return f"git:{path}"


BAD = [
    (wheel_source, "dotdot", errors.UnsafeSourceError, "`..` component"),
    (wheel_source, "absolute", errors.UnsafeSourceError, "has an empty or `.` component"),
    (wheel_source, "symlink", errors.UnsafeSourceError, "is a symbolic link"),
    (wheel_source, "no-metadata", errors.VersionProofError, "has no .dist-info/METADATA"),
    (wheel_source, "other-version", errors.VersionProofError, f"is vLLM {OTHER_VERSION}, not {NEXT_TAG}"),
    (wheel_source, "corrupt", errors.WheelIntegrityError, "cannot read"),
    (wheel_source, "declares-huge", errors.WheelIntegrityError, "declares 2048 MiB"),
    (wheel_source, "inflates-past-declared", errors.WheelIntegrityError, "cannot read"),
    (dir_source, "file-link", errors.UnsafeSourceError, "is a symbolic link"),
    (dir_source, "replaced-by-link", errors.UnsafeSourceError, "is a symbolic link"),
    (dir_source, "dir-link", errors.UnsafeSourceError, "is a symbolic link"),
    (dir_source, "subtree-link", errors.UnsafeSourceError, "is a symbolic link"),
    (dir_source, "version-link", errors.UnsafeSourceError, "is a symbolic link"),
    (dir_source, "no-version", errors.VersionProofError, f"cannot prove it is vLLM {NEXT_TAG}"),
    (dir_source, "other-version", errors.VersionProofError, f"says vLLM {OTHER_VERSION}, not {NEXT_TAG}"),
    (git_source, "symlink", errors.UnsafeSourceError, "is a symbolic link (mode 120000)"),
    (git_source, "submodule", errors.UnsafeSourceError, "is a submodule (mode 160000)"),
]


@pytest.mark.parametrize(
    ("make", "kind", "error_kind", "message"), BAD, ids=[f"{m.__name__}-{k}" for m, k, _, _ in BAD]
)
def test_unsafe_or_unproven_source_is_refused_before_anything_is_written(
    project: Path,
    tmp_path: Path,
    make: Callable[[str, Path, Path], str],
    kind: str,
    error_kind: type[errors.ReleaseError],
    message: str,
) -> None:
    source = make(kind, project, tmp_path / "src")
    before = snapshot(project)
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    result = run_release(project, "rebase", NEXT_TAG, "--from", source, "--report", str(tmp_path / "r"))
    assert result.returncode == 2, (result.stdout, result.stderr)
    error = failed(result)
    assert error.reference == error_kind.reference and message in error.message, result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(project) == before
    assert work_leftovers(project) == []
    assert list(tmp_path.rglob("ESCAPED*")) == []  # the payloads exist only inside the archive
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before


@pytest.mark.parametrize("make", [wheel_source, dir_source, git_source])
def test_a_well_formed_source_of_each_kind_goes_through(
    project: Path, tmp_path: Path, make: Callable[[str, Path, Path], str]
) -> None:
    source = make("good", project, tmp_path / "src")
    result = run_release(project, "rebase", NEXT_TAG, "--from", source, "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert f'tag = "{NEXT_TAG}"' in (project / "vendor/vllm_fused_moe/UPSTREAM.toml").read_text()
    assert run_release(project, "check").returncode == 0


@pytest.mark.parametrize("typed", [VERSION, f" {NEXT_TAG} ", f"{VERSION}\n"])
def test_a_tag_without_v_or_with_spaces_means_the_canonical_tag(project: Path, tmp_path: Path, typed: str) -> None:
    source = dir_source("good", project, tmp_path / "src")
    result = run_release(project, "rebase", typed, "--from", source, "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    pin = (project / "vendor/vllm_fused_moe/UPSTREAM.toml").read_text()
    assert f'tag = "{NEXT_TAG}"' in pin
    assert (tmp_path / "r" / "rebase-report.json").is_file()


# A tag of two numbers ("v0.20") and an empty one are refused the same way in one process:
# tests/unit/test_cli_main.py, test_bad_input_is_exit_2_one_error_and_one_hint_and_changes_nothing.
@pytest.mark.parametrize("typed", [f"release-{VERSION}", f"{NEXT_TAG} extra"])
def test_a_tag_that_is_not_a_release_is_one_line_exit_2(project: Path, typed: str) -> None:
    before = snapshot(project)
    result = run_release(project, "rebase", typed, "--from", "pypi")
    assert result.returncode == 2, result.stderr
    assert failed(result).reference in (UnknownTagError.reference, BadInputError.reference), result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(project) == before


def test_a_hand_edited_pin_tag_must_be_canonical(project: Path) -> None:
    pin = project / "vendor/vllm_fused_moe/UPSTREAM.toml"
    tag = Pin.load(pin).tag  # the head, whichever tag it is
    pin.write_text(pin.read_text().replace(f'tag = "{tag}"', f'tag = "{tag.removeprefix("v")}"'))
    result = run_release(project, "check")
    assert result.returncode == 2 and f"must be spelled '{tag}'" in result.stderr, result.stderr


def test_a_source_never_reads_through_a_link_even_to_a_vllm_file(project: Path, tmp_path: Path) -> None:
    """A link to an identical file is refused too: links are refused, not judged by their target."""
    source = dir_source("good", project, tmp_path / "src")
    subtree = Path(source.removeprefix("dir:")) / SUBTREE
    copy = tmp_path / "same.py"
    copy.write_bytes((subtree / "mori.py").read_bytes())
    (subtree / "mori.py").unlink()
    os.symlink(copy, subtree / "mori.py")
    result = run_release(project, "rebase", NEXT_TAG, "--from", source)
    assert result.returncode == 2 and "is a symbolic link" in result.stderr, result.stderr


# The same attacks through `--from pypi`, from a real index on 127.0.0.1: `rebase` reads the whole
# wheel (its sha256 checked against the index's), then the cached copy; `scan` reads it lazily over
# range requests. Both make the same checks.
PYPI_BAD = [
    ("dotdot", errors.UnsafeSourceError, "`..` component"),
    ("symlink", errors.UnsafeSourceError, "is a symbolic link"),
    ("no-metadata", errors.VersionProofError, "has no .dist-info/METADATA"),
    ("other-version", errors.VersionProofError, f"is vLLM {OTHER_VERSION}, not {NEXT_TAG}"),
    ("declares-huge", errors.WheelIntegrityError, "declares 2048 MiB"),
]


@pytest.mark.parametrize(("kind", "error_kind", "message"), PYPI_BAD, ids=[k for k, _, _ in PYPI_BAD])
def test_an_index_wheel_gets_the_same_checks_whole_or_lazily(
    project: Path, tmp_path: Path, kind: str, error_kind: type[errors.ReleaseError], message: str
) -> None:
    wheel = Path(wheel_source(kind, project, tmp_path / "src").removeprefix("wheel:"))
    before = snapshot(project)
    with LoopbackIndex([wheel]) as index:
        env = {"VLLM_FUSED_MOE_CACHE": str(tmp_path / "cache"), INDEX_ENV: index.url}
        for _ in range(2):
            result = run_release(
                project, "rebase", NEXT_TAG, "--from", "pypi", "--report", str(tmp_path / "r"), env=env
            )
            assert result.returncode == 2, (result.stdout, result.stderr)
            error = failed(result)
            assert error.reference == error_kind.reference and message in error.message, result.stderr
            assert "Traceback" not in result.stderr
        assert [status for status, _ in index.served.file_requests] == [200]  # whole, once; then the cache
        shutil.rmtree(tmp_path / "cache")
        lazy = run_release(project, "scan", "--since", VERSION, "--until", VERSION, "--dry-run", env=env)
        assert lazy.returncode == 2, (lazy.stdout, lazy.stderr)
        # scan names a release by its version (0.20.99), rebase by its tag (v0.20.99)
        error = failed(lazy)
        assert error.reference == error_kind.reference and "Traceback" not in lazy.stderr, lazy.stderr
        assert message.replace(NEXT_TAG, VERSION) in error.message, error
    assert {status for status, _ in index.served.file_requests[1:]} == {206}
    assert snapshot(project) == before
    assert work_leftovers(project) == []


def test_a_well_formed_index_wheel_goes_through_lazily(project: Path, tmp_path: Path) -> None:
    wheel = Path(wheel_source("good", project, tmp_path / "src").removeprefix("wheel:"))
    with LoopbackIndex([wheel]) as index:
        env = {"VLLM_FUSED_MOE_CACHE": str(tmp_path / "cache"), INDEX_ENV: index.url}
        result = run_release(project, "rebase", NEXT_TAG, "--from", "pypi", "--report", str(tmp_path / "r"), env=env)
    assert result.returncode == 0, result.stderr
    assert f'tag = "{NEXT_TAG}"' in (project / "vendor/vllm_fused_moe/UPSTREAM.toml").read_text()


def test_a_wheel_train_add_recorded_is_found_again_here_and_on_another_machine(project: Path, tmp_path: Path) -> None:
    """`train add --from wheel:PATH` records `wheel:NAME` and its sha256: `train check` (and so `build --all`)
    finds it again, on this machine in the wheel cache, on another from the index where it is a release file."""
    wheel = Path(wheel_source("good", project, tmp_path / "src").removeprefix("wheel:"))
    here = {"VLLM_FUSED_MOE_CACHE": str(tmp_path / "here"), INDEX_ENV: "http://127.0.0.1:9/simple/"}  # offline
    added = run_release(project, "train", "add", NEXT_TAG, "--from", f"wheel:{wheel}", env=here)
    assert added.returncode == 0, added.stderr
    assert f'source = "wheel:{wheel.name}"' in (project / "patches" / "train.toml").read_text()
    checked = run_release(project, "train", "check", NEXT_TAG, env=here)  # run where the wheel is not
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with LoopbackIndex([wheel]) as index:
        elsewhere = {"VLLM_FUSED_MOE_CACHE": str(tmp_path / "elsewhere"), INDEX_ENV: index.url}
        checked = run_release(project, "train", "check", NEXT_TAG, env=elsewhere)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert index.served.file_requests, "read from the index"
