"""No source is trusted, read in this process: a wheel file or a directory that escapes, links or lies
about its version is refused with its reason before anything is returned; a well-formed one is read whole.

The archives and trees are real (helpers/unsafe_sources.py), carrying the files vendor/ holds. The same
attacks through the CLI, through git and through a package index: tests/cli/test_source_safety.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import REPO
from helpers.synthetic import NEXT_TAG, make_wheel
from helpers.unsafe_sources import DIR_REFUSALS, WHEEL_REFUSALS, dir_source, wheel_source
from release.core.errors import BadInputError, UnsafeSourceError
from release.core.layout import Layout
from release.core.versions import canonical_tag
from release.model.source import Source
from release.pristine.sources import fetch


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    return Layout(REPO).vendor_files()


@pytest.mark.parametrize(("kind", "message"), WHEEL_REFUSALS.items(), ids=list(WHEEL_REFUSALS))
def test_a_wheel_that_escapes_links_or_lies_is_refused(
    files: dict[str, bytes], tmp_path: Path, kind: str, message: str
) -> None:
    source = wheel_source(kind, files, tmp_path / "src")
    with pytest.raises(BadInputError) as refused:
        fetch(NEXT_TAG, Source.parse(source))
    assert message in str(refused.value)
    assert list(tmp_path.rglob("ESCAPED*")) == []  # the payloads exist only inside the archive


@pytest.mark.parametrize(
    ("member", "problem"),
    [
        ("/etc/ESCAPED.py", "an absolute name"),
        ("../ESCAPED.py", "a `..` component"),
        ("a\\ESCAPED.py", "a NUL or a backslash"),
    ],
    ids=["absolute", "dotdot", "backslash"],
)
def test_a_wheel_member_outside_the_subtree_with_an_unsafe_name_is_refused(
    files: dict[str, bytes], tmp_path: Path, member: str, problem: str
) -> None:
    # Never read (it is not in the subtree), but docs/guarantees.md promises no such name in any source.
    path = make_wheel(tmp_path / f"vllm-{NEXT_TAG[1:]}-py3-none-any.whl", files, NEXT_TAG[1:], [(member, b"x = 1\n")])
    with pytest.raises(UnsafeSourceError) as refused:
        fetch(NEXT_TAG, Source.parse(f"wheel:{path}"))
    assert f"member {member!r} has {problem}" in str(refused.value), refused.value


def test_a_wheel_read_for_recording_is_found_again_by_its_recorded_name(
    files: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    wheel = Path(wheel_source("good", files, tmp_path / "src").removeprefix("wheel:"))
    read = fetch(NEXT_TAG, Source.parse(f"wheel:{wheel}"))  # what `train add` and `rebase` record
    recorded = Source.parse(f"wheel:{wheel.name}")  # what train.toml holds, beside the sha256
    monkeypatch.chdir(tmp_path)  # not where the wheel lay
    wheel.unlink()
    for source, lazy in ((recorded, True), (recorded.with_digest(read.wheel_sha256), True), (recorded, False)):
        again = fetch(NEXT_TAG, source, lazy=lazy)  # `train check`, `build --all`, `train add --all`
        assert (again.files, again.wheel, again.wheel_sha256) == (read.files, wheel.name, read.wheel_sha256)


def test_a_kept_wheel_that_changed_on_disk_is_not_used(
    files: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    wheel = Path(wheel_source("good", files, tmp_path / "src").removeprefix("wheel:"))
    read = fetch(NEXT_TAG, Source.parse(f"wheel:{wheel}"))
    (kept,) = (tmp_path / "cache").rglob(wheel.name)
    kept.write_bytes(wheel.read_bytes() + b"\0")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInputError, match=f"no wheel at {wheel.name}"):
        fetch(NEXT_TAG, Source.parse(f"wheel:{wheel.name}"), lazy=True)
    assert not kept.exists(), read.wheel_sha256  # deleted, and said so


@pytest.mark.parametrize(("kind", "message"), DIR_REFUSALS.items(), ids=list(DIR_REFUSALS))
def test_a_directory_that_links_or_lies_is_refused(
    files: dict[str, bytes], tmp_path: Path, kind: str, message: str
) -> None:
    source = dir_source(kind, files, tmp_path / "src")
    with pytest.raises(BadInputError) as refused:
        fetch(NEXT_TAG, Source.parse(source))
    assert message in str(refused.value)


@pytest.mark.parametrize("make", [wheel_source, dir_source])
def test_a_well_formed_wheel_or_directory_is_read_whole(
    files: dict[str, bytes], tmp_path: Path, make: Callable[[str, dict[str, bytes], Path], str]
) -> None:
    tree = fetch(NEXT_TAG, Source.parse(make("good", files, tmp_path / "src")))
    assert tree.tag == NEXT_TAG and tree.files == files
    assert tree.flashinfer == "flashinfer-python==0.6.8.post1"  # what the synthetic source pins


@pytest.mark.parametrize("typed", [NEXT_TAG[1:], f" {NEXT_TAG} ", f"{NEXT_TAG[1:]}\n"])
def test_a_tag_without_v_or_with_spaces_means_the_canonical_tag(
    files: dict[str, bytes], tmp_path: Path, typed: str
) -> None:
    assert canonical_tag(typed) == NEXT_TAG
    assert fetch(typed, Source.parse(dir_source("good", files, tmp_path / "src"))).tag == NEXT_TAG


@pytest.mark.parametrize("typed", ["v0.20", "release-0.20.99", "v0.20.99 extra", "", "v0.21.0rc1", "nightly"])
def test_a_tag_that_is_not_a_release_is_refused_before_any_source_is_read(typed: str) -> None:
    with pytest.raises(BadInputError, match="is not a vLLM release tag"):
        fetch(typed, Source.parse("dir:/nonexistent"))


def test_an_unknown_kind_of_source_is_refused() -> None:
    # Refused where the text enters (Source.parse), before any reader is picked.
    with pytest.raises(BadInputError, match="unknown source 'svn:foo'"):
        Source.parse("svn:foo")
