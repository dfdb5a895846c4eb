"""The PEP 503 index directory: adds without losing, reruns safely, refuses bad input unchanged."""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from helpers.build import PUBLISH_BUILT, plan
from helpers.failure import failed
from release.core.errors import (
    BadWheelError,
    ForeignProjectError,
    IndexClashError,
    IndexCorruptError,
    IndexNotWritableError,
)
from release.core.layout import Layout
from release.overlay.build import PROJECT, build
from release.overlay.index import publish
from release.overlay.pages import REQUIREMENTS, TMP_PREFIX
from release.overlay.target import BuildResult


def snapshot(directory: Path) -> dict[str, bytes]:
    # The index lock file (INDEX_DIR/.publish.lock*) is not part of the index: it stays by design.
    return {
        p.relative_to(directory).as_posix(): (p.read_bytes() if p.is_file() else b"<dir>")
        for p in sorted(directory.rglob("*"))
        if not p.name.startswith(".publish.lock")
    }


def links(page: Path) -> dict[str, tuple[str, str]]:
    text = page.read_text()
    found = re.findall(r'<a href="([^"#]+)#sha256=([0-9a-f]{64})"(?: data-requires-python="([^"]*)")?', text)
    return {href.replace("%2B", "+"): (sha, html.unescape(requires)) for href, sha, requires in found}


def level_of(result: BuildResult) -> int:
    """The N of a build's +fm.N: the head's recorded level, or one above it where the shipped files changed
    (a runtime edit not yet recorded by `build`), so never a number written here."""
    return int(str(Version(result.version).local).split(".")[1])


@pytest.fixture(scope="module")
def second(layout: Layout, built: BuildResult, tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    return build(plan(layout, tmp_path_factory.mktemp("fm-next"), patch_level=level_of(built) + 1))


@pytest.fixture
def published(tmp_path: Path, built: BuildResult) -> Path:
    index = tmp_path / "index"
    publish([built.wheel], index)
    return index


def test_pages_link_each_file_with_its_sha256_and_requires_python(published: Path, built: BuildResult) -> None:
    project = published / "simple" / "vllm-fused-moe"
    listed = links(project / "index.html")
    assert listed == {built.wheel.name: (built.sha256, ">=3.10")}
    assert hashlib.sha256((project / built.wheel.name).read_bytes()).hexdigest() == built.sha256
    assert 'href="vllm-fused-moe/"' in (published / "simple" / "index.html").read_text()
    assert "&gt;=3.10" in (project / "index.html").read_text()


def test_rerun_changes_nothing_and_a_new_release_keeps_the_old(
    published: Path, built: BuildResult, second: BuildResult
) -> None:
    before = snapshot(published)
    outcome = publish([built.wheel], published)
    assert (outcome.added, outcome.already) == ([], [built.wheel.name])
    assert snapshot(published) == before
    publish([second.wheel], published)
    listed = links(published / "simple" / "vllm-fused-moe" / "index.html")
    assert list(listed) == [built.wheel.name, second.wheel.name]  # oldest first, by version


def test_real_vllm_wheel_with_a_build_tag_goes_in_next_to_ours(
    tmp_path: Path, built: BuildResult, vllm_wheels: dict[str, Path]
) -> None:
    index = tmp_path / "index"
    publish([built.wheel, *vllm_wheels.values()], index)
    listed = links(index / "simple" / "vllm" / "index.html")
    assert set(listed) == {w.name for w in vllm_wheels.values()}
    assert all(requires.startswith(">=3.10") or "3.10" in requires for _sha, requires in listed.values())


def test_same_name_different_bytes_is_refused_and_index_unchanged(
    published: Path, built: BuildResult, tmp_path: Path
) -> None:
    clash = tmp_path / "clash" / built.wheel.name
    clash.parent.mkdir()
    with zipfile.ZipFile(built.wheel) as src, zipfile.ZipFile(clash, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item) + (b"\n# rebuilt\n" if item.filename.endswith("_meta.py") else b""))
    before = snapshot(published)
    with pytest.raises(IndexClashError, match="different bytes"):
        publish([clash], published)
    assert snapshot(published) == before


def test_wheel_whose_name_clashes_with_its_metadata_is_refused(
    published: Path, built: BuildResult, tmp_path: Path
) -> None:
    name, version, rest = built.wheel.name.split("-", 2)
    renamed = tmp_path / "-".join([name, version.replace(f"+fm.{level_of(built)}", "+fm.77"), rest])
    assert renamed.name != built.wheel.name
    shutil.copyfile(built.wheel, renamed)
    before = snapshot(published)
    with pytest.raises(BadWheelError, match="metadata"):
        publish([renamed], published)
    assert snapshot(published) == before


def test_read_only_index_is_refused_and_unchanged(published: Path, second: BuildResult) -> None:
    directories = [p for p in [published, *published.rglob("*")] if p.is_dir()]
    before = snapshot(published)
    for directory in directories:
        directory.chmod(directory.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        with pytest.raises(IndexNotWritableError, match="read-only"):
            publish([second.wheel], published)
    finally:
        for directory in directories:
            directory.chmod(directory.stat().st_mode | stat.S_IWUSR)
    assert snapshot(published) == before


@pytest.mark.parametrize("damage", ["unlisted", "missing", "corrupt", "junk"])
def test_damage_no_publish_makes_is_refused_and_unchanged(
    published: Path, built: BuildResult, second: BuildResult, damage: str
) -> None:
    project = published / "simple" / "vllm-fused-moe"
    if damage == "unlisted":  # a wheel of another project in our project's directory
        shutil.copyfile(second.wheel, project / "stray-0.1-py3-none-any.whl")
    elif damage == "missing":
        (project / built.wheel.name).unlink()
    elif damage == "corrupt":
        (project / built.wheel.name).write_bytes(b"not the wheel")
    else:
        (project / "notes.txt").write_text("hand-made\n")
    before = snapshot(published)
    with pytest.raises(IndexCorruptError):
        publish([second.wheel], published)
    assert snapshot(published) == before


def test_what_an_interrupted_publish_leaves_is_repaired_and_said(
    published: Path, built: BuildResult, second: BuildResult
) -> None:
    project = published / "simple" / "vllm-fused-moe"
    (project / f"{TMP_PREFIX}{second.wheel.name}").write_bytes(second.wheel.read_bytes()[:100])
    outcome = publish([second.wheel], published)
    assert outcome.added == [second.wheel.name]
    assert any("leftover" in line for line in outcome.repaired)
    assert not list(published.rglob(f"{TMP_PREFIX}*"))
    assert list(links(project / "index.html")) == [built.wheel.name, second.wheel.name]


@pytest.mark.parametrize("cut", [0.5, 0.0])
def test_a_truncated_page_is_repaired_on_a_rerun_with_nothing_to_add(
    published: Path, built: BuildResult, cut: float
) -> None:
    page = published / "simple" / "vllm-fused-moe" / "index.html"
    whole = page.read_bytes()
    page.write_bytes(whole[: int(len(whole) * cut)])
    outcome = publish([built.wheel], published)
    assert (outcome.added, outcome.already) == ([], [built.wheel.name])
    assert outcome.repaired and "repaired" in outcome.repaired[0]
    assert page.read_bytes() == whole


def test_a_truncated_page_in_a_read_only_index_is_refused(published: Path, built: BuildResult) -> None:
    page = published / "simple" / "vllm-fused-moe" / "index.html"
    page.write_bytes(page.read_bytes()[:50])
    directories = [p for p in [published, *published.rglob("*")] if p.is_dir()]
    before = snapshot(published)
    for directory in directories:
        directory.chmod(directory.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        with pytest.raises(IndexCorruptError, match="read-only"):
            publish([built.wheel], published)
    finally:
        for directory in directories:
            directory.chmod(directory.stat().st_mode | stat.S_IWUSR)
    assert snapshot(published) == before


def test_missing_parents_of_the_index_are_created(tmp_path: Path, built: BuildResult) -> None:
    index = tmp_path / "a" / "b" / "index"
    proc = subprocess.run(
        [sys.executable, "-m", "release", *PUBLISH_BUILT, str(built.wheel), str(index)],
        capture_output=True,
        text=True,
        cwd=Layout.default().root,
    )
    assert proc.returncode == 0, proc.stderr
    assert links(index / "simple" / "vllm-fused-moe" / "index.html") == {built.wheel.name: (built.sha256, ">=3.10")}


def _rewrite_member(source: Path, target: Path, name_end: str, data: bytes | None) -> Path:
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            body = src.read(item)
            dst.writestr(item, data if data is not None and item.filename.endswith(name_end) else body)
    return target


def _corrupt_member(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    with zipfile.ZipFile(target) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(".dist-info/METADATA"))
    data = bytearray(target.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 10
    data[start : start + 8] = b"\xff" * 8
    target.write_bytes(bytes(data))
    return target


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("non-utf8", "not UTF-8"),
        ("bad-version", "not a PEP 440 version"),
        ("corrupt-data", "corrupt data"),
    ],
)
def test_a_wheel_with_bad_metadata_is_one_line_exit_2(
    published: Path, built: BuildResult, tmp_path: Path, damage: str, message: str
) -> None:
    target = tmp_path / "bad" / built.wheel.name
    target.parent.mkdir()
    if damage == "non-utf8":
        _rewrite_member(built.wheel, target, ".dist-info/METADATA", b"Name: vllm-fused-moe\nVersion: \xff\xfe\n")
    elif damage == "bad-version":
        _rewrite_member(built.wheel, target, ".dist-info/METADATA", b"Name: vllm-fused-moe\nVersion: one.two\n")
    else:
        _corrupt_member(built.wheel, target)
    before = snapshot(published)
    proc = subprocess.run(
        [sys.executable, "-m", "release", "publish", str(target), str(published)],
        capture_output=True,
        text=True,
        cwd=Layout.default().root,
    )
    assert proc.returncode == 2, proc.stderr
    error = failed(proc)
    assert error.reference == BadWheelError.reference and message in error.message, proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(published) == before


def test_cli_reports_one_line_and_exit_code_2(published: Path, built: BuildResult, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / built.wheel.name).write_bytes(b"not a zip")
    before = snapshot(published)
    proc = subprocess.run(
        [sys.executable, "-m", "release", "publish", str(bad), str(published)],
        capture_output=True,
        text=True,
        cwd=Layout.default().root,
    )
    assert proc.returncode == 2
    # One error line first; a `note:` before it is a lock note (another test's publish reading the same checkout
    # on the other xdist worker: publish reads it as a shared reader and says so), never the error's own output.
    said = [line for line in proc.stderr.splitlines() if not line.startswith("note: ")]
    assert failed(proc).reference == BadWheelError.reference and said[0].startswith("error["), proc.stderr
    assert snapshot(published) == before


# ------------------------------------------------- what the `publish` command adds: ours only, skip no-ops


def release_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "release", *args], capture_output=True, text=True, cwd=Layout.default().root
    )


def pinned(index: Path) -> dict[str, tuple[str, str]]:
    """INDEX/requirements/vllm-X.txt read back: {X: (the version pinned, its sha256)}; each pins one wheel."""
    found = {}
    for path in sorted((index / REQUIREMENTS).glob("*.txt")):
        pins = re.findall(r"^vllm-fused-moe==(\S+) \\\n    --hash=sha256:([0-9a-f]{64})$", path.read_text(), re.M)
        assert len(pins) == 1, path.read_text()
        found[path.name.removeprefix("vllm-").removesuffix(".txt")] = pins[0]
    return found


def changed(source: Path, target: Path, member_end: str = "/doctor.py") -> Path:
    """`source` with one module changed: a real change in what the wheel installs, under its file name."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            body = src.read(item)
            dst.writestr(item, body + b"\n# a real change\n" if item.filename.endswith(member_end) else body)
    return target


@pytest.fixture
def commanded(tmp_path: Path, built: BuildResult) -> Path:
    """An index made by the `publish` command, holding the head's wheel."""
    index = tmp_path / "commanded"
    proc = release_cli(*PUBLISH_BUILT, str(built.wheel), str(index))
    assert proc.returncode == 0, proc.stderr
    return index


def test_publish_pins_the_newest_wheel_of_each_vllm_release_in_a_requirements_file(
    tmp_path: Path, built: BuildResult, second: BuildResult
) -> None:
    index = tmp_path / "index"
    vllm = Version(built.version).public
    first = release_cli(*PUBLISH_BUILT, str(built.wheel), str(index))
    assert first.returncode == 0, first.stderr
    assert f"wrote {REQUIREMENTS}/vllm-{vllm}.txt" in first.stdout, first.stdout
    assert pinned(index) == {vllm: (built.version, built.sha256)}
    # A real change at the next patch level is published, and the file now pins it. By the index stage: the
    # command refuses this hand-changed wheel as no build of the checkout (tests/e2e/test_rebuild.py).
    fixed = changed(second.wheel, tmp_path / "fixed" / second.wheel.name)
    after = publish([fixed], index, project=PROJECT, allow_dirty=True)
    assert after.added == [fixed.name], after
    assert pinned(index) == {vllm: (second.version, hashlib.sha256(fixed.read_bytes()).hexdigest())}
    before = snapshot(index)
    again = publish([fixed], index, project=PROJECT, allow_dirty=True)
    assert not again.added and not again.requirements, again
    assert snapshot(index) == before


def test_the_command_refuses_a_wheel_of_another_project_and_leaves_the_index_unchanged(
    commanded: Path, vllm_wheels: dict[str, Path]
) -> None:
    wheel = next(iter(vllm_wheels.values()))
    before = snapshot(commanded)
    proc = release_cli("publish", str(wheel), str(commanded))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = failed(proc)
    assert error.reference == ForeignProjectError.reference and error.message.startswith(f"{wheel.name} "), proc.stderr
    assert snapshot(commanded) == before
    assert not (commanded / "simple" / "vllm").exists()


def test_the_command_refuses_an_index_that_already_holds_another_project(
    commanded: Path, built: BuildResult, vllm_wheels: dict[str, Path]
) -> None:
    publish([next(iter(vllm_wheels.values()))], commanded)  # the plain index writer, as an older publish did
    before = snapshot(commanded)
    proc = release_cli(*PUBLISH_BUILT, str(built.wheel), str(commanded))
    assert proc.returncode == 2 and "holds vllm beside vllm-fused-moe" in proc.stderr, proc.stderr
    assert snapshot(commanded) == before


def test_a_rebuild_that_changes_only_build_information_is_skipped_and_said(
    commanded: Path, built: BuildResult, layout: Layout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = json.loads(zipfile.ZipFile(built.wheel).read("vllm_fused_moe/_build_info.json"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(info["source_date_epoch"] + 86400))
    rebuilt = build(plan(layout, tmp_path / "rebuilt"))
    assert rebuilt.wheel.name == built.wheel.name and rebuilt.sha256 != built.sha256
    before = snapshot(commanded)
    proc = release_cli(*PUBLISH_BUILT, str(rebuilt.wheel), str(commanded))
    assert proc.returncode == 0, proc.stderr
    assert (
        f"skipped {built.wheel.name}: the index already holds {built.wheel.name} for the same patched files; "
        "only build information differs (commit, build time), so a rebuild of it is not published"
    ) in proc.stdout, proc.stdout
    assert snapshot(commanded) == before


def test_a_new_patch_level_that_changes_nothing_is_skipped_and_a_real_change_is_not(
    commanded: Path, built: BuildResult, second: BuildResult, tmp_path: Path
) -> None:
    before = snapshot(commanded)
    proc = release_cli(*PUBLISH_BUILT, str(second.wheel), str(commanded))
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {second.wheel.name}: the index already holds {built.wheel.name} for the same patched files" in (
        proc.stdout
    ), proc.stdout
    assert snapshot(commanded) == before
    # A changed module under the published name is still a clash: a release is never replaced.
    clash = release_cli(
        *PUBLISH_BUILT, str(changed(built.wheel, tmp_path / "clash" / built.wheel.name)), str(commanded)
    )
    assert clash.returncode == 2 and "different bytes" in clash.stderr, clash.stderr
    assert snapshot(commanded) == before


def test_requirements_files_missing_or_stale_are_written_and_strays_refused(
    commanded: Path, built: BuildResult
) -> None:
    requirements = commanded / REQUIREMENTS
    whole = snapshot(commanded)
    shutil.rmtree(requirements)  # as an index published before requirements files existed
    proc = release_cli(*PUBLISH_BUILT, str(built.wheel), str(commanded))
    assert proc.returncode == 0 and "note: wrote requirements/vllm-" in proc.stderr, proc.stderr
    assert snapshot(commanded) == whole
    (only,) = requirements.iterdir()
    only.write_text(only.read_text()[:40])  # cut short
    proc = release_cli(*PUBLISH_BUILT, str(built.wheel), str(commanded))
    assert proc.returncode == 0 and "it did not name the newest wheel" in proc.stderr, proc.stderr
    assert snapshot(commanded) == whole
    (requirements / "vllm-9.9.txt").write_text("vllm-fused-moe==9.9\n")
    before = snapshot(commanded)
    proc = release_cli(*PUBLISH_BUILT, str(built.wheel), str(commanded))
    assert proc.returncode == 2 and "no requirements file a publish writes" in proc.stderr, proc.stderr
    assert snapshot(commanded) == before
