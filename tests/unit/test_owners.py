"""One owner per fact (issue 39): where a fact has to be written twice, the two spellings agree."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.fix import fix_patch
from helpers.sources import release_trees
from release.core.errors import (
    BadInputError,
    ConfigError,
    MalformedDataError,
    MalformedPatchError,
    MalformedSeriesError,
    TrainFileError,
    UnknownTagError,
)
from release.core.layout import BUILD_INFO_MEMBER, BUILD_INFO_NAME, OVERLAY_PACKAGE, PROJECT_ROOT, Layout
from release.core.versions import canonical_tag, package_version, parse_version
from release.model.lines import read_lines
from release.model.patch import Patch, is_patch_name
from release.model.series import Series
from release.model.train import _carried as carried_by
from release.pq.names import number_of
from release.queue.bugs import scan_data
from release.scan.document import load_document
from release.scan.serve import read_serve
from release.train.watch import load_scan
from vllm_fused_moe import _meta


def test_the_build_info_the_tooling_writes_is_the_file_the_runtime_reads() -> None:
    """The runtime ships in the wheel and cannot import release/: it names _build_info.json itself."""
    layout = Layout(PROJECT_ROOT)
    assert layout.runtime_package.resolve() == _meta.HERE
    assert _meta.BUILD_INFO == _meta.HERE / BUILD_INFO_NAME
    assert f"{layout.runtime_package.name}/{BUILD_INFO_NAME}" == BUILD_INFO_MEMBER
    assert layout.runtime_package.name == OVERLAY_PACKAGE


def test_versions_are_read_by_core_versions_alone() -> None:
    """No tooling module parses a version with packaging itself: release/core/versions.py owns both grammars.

    The runtime (release/overlay/runtime/) ships in the wheel without release/, so it is not counted."""
    readers = []
    for name, tree in release_trees():
        if name == "release/core/versions.py":
            continue
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if any(imported == "packaging.version" for imported in names):
                readers.append(name)
    assert readers == []


def test_a_release_tag_is_a_version_tag_without_pre_release_or_build() -> None:
    """canonical_tag reads the one tag grammar (VERSION_TAG_RE) that parse_version reads."""
    for text in (
        "v0.11.0",
        "0.11.0",
        " v0.10.1.post2 ",
        "v0.11.0rc1",
        "0.11.0-1",
        "v0.11.0.dev3",
        "nightly",
        "v٠.11.1",
    ):
        parsed = parse_version(text)
        final = parsed is not None and parsed[0].is_final and parsed[1] is None
        try:
            tag = canonical_tag(text)
        except UnknownTagError:
            assert not final, text
        else:
            assert final and parsed is not None and tag == parsed[0].tag, text
    assert package_version("1.2.3.1") > package_version("1.2.3")  # an index's version, as pip orders it


def test_the_serve_facts_come_from_the_lines_the_model_read(tmp_path: Path) -> None:
    """patches/lines.toml is parsed once, by model/lines.py: scan/serve.py reads the tables it kept."""
    layout = Layout(PROJECT_ROOT)
    lines = read_lines(layout.lines)
    from_the_file = read_serve(layout.lines, read_lines(layout.lines))
    assert from_the_file and any(serve.ranges for serve in from_the_file.values())
    assert read_serve(tmp_path / "gone.toml", lines) == from_the_file  # the path is only named in messages


@pytest.mark.parametrize(
    "text",
    ["{", "[]", '{"schema": 2, "releases": {}}', '{"schema": 1, "releases": []}', '{"releases": {}}'],
    ids=["not-json", "a-list", "another-schema", "releases-a-list", "no-schema"],
)
def test_every_reader_of_the_scan_document_refuses_the_same_files(tmp_path: Path, text: str) -> None:
    """The gates (`status`, `build`, `publish`), `scan`'s previous document and `train watch` read the scan
    through one rule: what one refuses, each refuses, each with its own error."""
    layout = Layout(tmp_path)
    layout.affected_json.parent.mkdir(parents=True)
    layout.affected_json.write_text(text, encoding="utf-8")
    reads: tuple[tuple[Callable[[], object], type[BadInputError]], ...] = (
        (lambda: scan_data(layout), MalformedDataError),
        (lambda: load_document(layout.affected_json), ConfigError),
        (lambda: load_scan(layout.affected_json), BadInputError),
    )
    for read, error in reads:
        with pytest.raises(BadInputError) as caught:
            read()
        assert caught.type is error and "is not" in str(caught.value)
    layout.affected_json.write_text('{"schema": 1, "releases": {}}', encoding="utf-8")
    assert scan_data(layout) == load_document(layout.affected_json) == load_scan(layout.affected_json)
    layout.affected_json.unlink()
    assert scan_data(layout) is None and load_document(layout.affected_json) is None


@pytest.mark.parametrize(
    ("name", "is_one"),
    [
        ("0007-a-fix.patch", True),
        ("0007-v2.1_b.patch", True),
        ("a-fix.patch", False),  # no number: the series took it, train.toml did not
        ("0007-A-Fix.patch", False),  # upper case: Varies: and train.toml took it, pq did not
        ("0007-.hidden.patch", False),  # a slug from a dot: train.toml took it
        ("0007-a+fix.patch", False),
        ("0007-é.patch", False),
    ],
)
def test_every_file_that_names_a_patch_takes_the_same_names(tmp_path: Path, name: str, is_one: bool) -> None:
    """A series entry, `Varies:`, train.toml's `patches` and pq's `Patch-Name:` share one rule (is_patch_name)."""
    assert is_patch_name(name) is is_one
    (tmp_path / name).write_text("", encoding="utf-8")
    series = Series((name,))
    if is_one:
        series.validate(tmp_path / "series", None)
    else:
        with pytest.raises(MalformedSeriesError, match="is not a patch file name"):
            series.validate(tmp_path / "series", None)
    variant = Patch.load(fix_patch())
    variant = variant.with_trailer("Varies", name)
    if is_one:
        variant.validate_mail()
    else:
        with pytest.raises(MalformedPatchError, match="Varies"):
            variant.validate_mail()
    if is_one:  # what a [[release]] table of train.toml carries
        assert carried_by("train.toml [[release]]", {"patches": [name]})[0] == (name,)
    else:
        with pytest.raises(TrainFileError, match="patch file names"):
            carried_by("train.toml [[release]]", {"patches": [name]})
    assert (number_of(name) is not None) is is_one


def test_the_evidence_publish_keeps_is_no_larger_than_the_doctor_reads() -> None:
    """publish reads back the evidence files it wrote and the doctor reads them from the index: one bound, written
    twice because the runtime cannot import release/."""
    from release.evidence.record import EVIDENCE_LIMIT
    from vllm_fused_moe._doctor import evidence

    assert EVIDENCE_LIMIT == evidence.EVIDENCE_LIMIT
