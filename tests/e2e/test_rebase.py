"""`rebase`, `check` and `status` on real vLLM release files.

Upstream input is the real release wheels from the package index (downloaded once
into the cache, only the subtree read) and git repositories built in the test from
those same real files. Which releases is data (tests/releases.toml): every test starts
from a copy of vendor/ rebased onto `rebase.from`, whatever tag vendor/ itself is at.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import private_cache, run_release, snapshot, tag_facts, work_leftovers
from helpers.failure import failed
from helpers.fix import fix_patch
from helpers.synthetic import patch_message
from release.core import errors
from release.core.errors import DriftError
from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE, read_tree
from release.core.versions import version_of_tag
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.series import Series
from release.model.source import Source
from release.pristine.sources import fetch
from release.queue.verified import read_verified

pytestmark = pytest.mark.network  # the release wheels come from the package index once, then the cache

TWO_SIDED = "vendor/vllm_fused_moe/prepare_finalize/flashinfer_nvlink_two_sided.py"
ONE_SIDED = "vendor/vllm_fused_moe/prepare_finalize/flashinfer_nvlink_one_sided.py"
FIX = fix_patch().name  # the queue's first bug fix (helpers/fix.py), whatever its name
FROM, TO, FIXED = tag_facts.rebase_from(), tag_facts.rebase_to(), tag_facts.fixed_upstream()


@pytest.fixture
def project(project: Path) -> Path:
    """The project copy at the scenario's starting release (rebased there unless vendor/ is)."""
    if Pin.load(project / "vendor/vllm_fused_moe/UPSTREAM.toml").tag != FROM:
        moved = run_release(project, "rebase", FROM, "--from", "pypi", "--allow-older")
        assert moved.returncode == 0, moved.stderr
    return project


def line_changes(old: dict[str, bytes], new: dict[str, bytes]) -> dict[str, tuple[int, int]]:
    """Per changed file: (lines added, lines removed), computed here independently of the tool."""
    changes = {}
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            diff = difflib.unified_diff(
                old.get(name, b"").decode().splitlines(), new.get(name, b"").decode().splitlines(), lineterm="", n=0
            )
            body = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
            changes[name] = (sum(line[0] == "+" for line in body), sum(line[0] == "-" for line in body))
    return changes


def reduced_flags(root: Path) -> list[str]:
    """What `output_is_reduced` returns in each vendored file (the line after the def)."""
    flags = []
    for rel in (TWO_SIDED, ONE_SIDED):
        lines = (root / rel).read_text().splitlines()
        at = next(i for i, line in enumerate(lines) if "def output_is_reduced" in line)
        code = (line.strip() for line in lines[at + 1 :])
        flags.append(next(line for line in code if line and not line.startswith("#")))
    return flags


def test_rebase_onto_the_pinned_tag_changes_no_byte(project: Path, tmp_path: Path) -> None:
    before = snapshot(project)
    result = run_release(project, "rebase", FROM, "--from", "pypi", "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert snapshot(project) == before
    report = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    assert report["result"] == "nothing-to-do"


def test_rebase_to_another_release_from_pypi_applies_the_fix(project: Path, tmp_path: Path) -> None:
    assert reduced_flags(project) == ["return True", "return True"]
    patch_before = (project / "patches" / FIX).read_bytes()
    result = run_release(project, "rebase", TO, "--from", "pypi", "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    # Every patch of the queue is in the report, whatever else the queue holds; the fix applies.
    entries = {p["name"]: p for p in report["patches"]}
    series = Series.load(project / "patches" / "series")
    assert set(series.names) <= set(entries) and entries[FIX]["status"] == "applies"
    # upstream moved the context; the patch follows it
    assert entries[FIX]["refreshed"] is True
    assert (project / "patches" / FIX).read_bytes() != patch_before
    pristine = fetch(TO, Source.parse("pypi"))
    assert report["flashinfer_new"] == pristine.flashinfer
    changed = {c["file"]: (c["added_lines"], c["removed_lines"]) for c in report["upstream_changes"]}
    assert changed == line_changes(fetch(FROM, Source.parse("pypi")).files, pristine.files)
    assert f"| `{FIX}` | **applies** |" in (tmp_path / "r" / "rebase-report.md").read_text()
    # vendor/ is now TO + the fix, and check agrees with itself
    assert reduced_flags(project) == ["return True", "return True"]
    pin = Pin.load(project / "vendor/vllm_fused_moe/UPSTREAM.toml")
    assert (pin.tag, pin.wheel) == (TO, pristine.wheel)
    assert run_release(project, "check").returncode == 0
    # vendor/ differs from TO exactly in the files the queue's patches change, whatever else the queue holds.
    vendored = read_tree(project / "vendor/vllm_fused_moe/prepare_finalize")
    touched = {
        name.removeprefix(f"{UPSTREAM_SUBTREE}/")
        for patch in series.names
        for name in Patch.load(project / "patches" / patch).files
    }
    assert {k for k in vendored if vendored[k] != pristine.files[k]} == touched


def test_rebase_to_a_fixed_release_retires_the_fix_as_upstream(project: Path, tmp_path: Path) -> None:
    result = run_release(project, "rebase", FIXED, "--from", "pypi", "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    assert [(p["name"], p["status"]) for p in report["patches"]] == [(FIX, "upstream")]
    flashinfer = fetch(FIXED, Source.parse("pypi")).flashinfer
    assert report["flashinfer_new"] == flashinfer
    verified = read_verified(project / "vendor/vllm_fused_moe/VERIFIED.toml")
    if flashinfer.removeprefix("flashinfer-python==") not in verified.versions:
        assert "outside the verified range" in (tmp_path / "r" / "rebase-report.md").read_text()
    assert not (project / "patches" / FIX).exists()
    retired = (project / "patches" / "retired" / FIX).read_text()
    assert f"\nApplied-Upstream: {FIXED}\n" in retired
    series = Series.load(project / "patches" / "series")
    assert series.names == [] and series.retired == [FIX]  # kept in its place for the tags before FIXED
    assert reduced_flags(project) == ["return True", "return True"]  # upstream's own fix now
    assert run_release(project, "check").returncode == 0
    status = run_release(project, "status").stdout
    assert f"upstream since {FIXED}" in status and "patches in series (0)" in status


def test_dry_run_reports_and_changes_nothing(project: Path, tmp_path: Path) -> None:
    before = snapshot(project)
    result = run_release(project, "rebase", FIXED, "--from", "pypi", "--dry-run", "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert snapshot(project) == before
    report = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    assert report["dry_run"] is True and report["patches"][0]["status"] == "upstream"


def test_check_reports_each_hand_edit_by_file(project: Path) -> None:
    (project / TWO_SIDED).write_text((project / TWO_SIDED).read_text().replace("return True", "return False"))
    batched = project / "vendor/vllm_fused_moe/prepare_finalize/batched.py"
    batched.write_text(batched.read_text() + "# local tweak\n")
    (project / "vendor/vllm_fused_moe/prepare_finalize/extra.py").write_text("")
    (project / "vendor/vllm_fused_moe/prepare_finalize/mori.py").unlink()
    result = run_release(project, "check")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("patch-does-not-reverse") and "flashinfer_nvlink_two_sided.py" in line for line in lines)
    assert any(line.startswith("edited") and "batched.py" in line for line in lines)
    assert any(line.startswith("added") and "extra.py" in line for line in lines)
    assert any(line.startswith("missing") and "mori.py" in line for line in lines)
    assert len(lines) == 4
    # Then the one error line and hint every failure gets (DriftError), with no traceback.
    error = failed(result)
    assert len(result.stderr.splitlines()) == 2 and error.reference == DriftError.reference, result.stderr
    assert (error.message, error.hint) == (
        "vendor/ drifted from pristine + series in 4 file(s)",
        DriftError.default_hint,
    )


# ------------------------------------------------------------------ git sources


@pytest.fixture(scope="module")
def vllm_git(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vLLM-shaped git history from the real files of two tags: FROM then TO."""
    path = tmp_path_factory.mktemp("vllm-git")
    repo = WorkRepo.create(path)
    (path / "requirements").mkdir()
    for tag in (FROM, TO):
        tree = fetch(tag, Source.parse("pypi"))
        (path / "requirements" / "cuda.txt").write_text(f"{tree.flashinfer}\n")
        (path / "README.md").write_text(f"vllm {tag}\n")
        repo.run("add", "requirements", "README.md")
        repo.commit_subtree(tree.files, f"release {tag}")
        repo.run("tag", tag)
    return path


def add_conflicting_patch(project: Path) -> str:
    """Patch 0002 edits the deepep_ht.py line that upstream rewrote between FROM and TO."""
    work = WorkRepo.create(project.parent / "make-0002")
    base = work.commit_subtree(read_tree(project / "vendor/vllm_fused_moe/prepare_finalize"), "FROM + series")
    target = work.subtree / "deepep_ht.py"
    text = target.read_text()
    assert "is_fp4_scale_swizzled=quant_config.is_nvfp4_scale_swizzled," in text
    target.write_text(
        text.replace(
            "is_fp4_scale_swizzled=quant_config.is_nvfp4_scale_swizzled,",
            "is_fp4_scale_swizzled=bool(quant_config.is_nvfp4_scale_swizzled),",
        )
    )
    work.run("commit", "-q", "-a", "-m", patch_message("deepep_ht: test patch that upstream will conflict with"))
    out = work.export(base, project.parent / "out")[0]
    name = "0002-deepep-ht-conflict.patch"
    (project / "patches" / name).write_text(out.read_text())
    with (project / "patches" / "series").open("a") as series:
        series.write(name + "\n")
    for line_series in (project / "patches" / "lines").glob("*/series"):  # no older line has deepep_ht.py
        with line_series.open("a") as series:
            series.write(f"skip {name}: a test's patch of the head line only\n")
    (project / "vendor/vllm_fused_moe/prepare_finalize/deepep_ht.py").write_text(target.read_text())
    return name


@pytest.mark.parametrize("scheme", ["git:", "git+file://"])
def test_git_sources_read_the_tag(project: Path, vllm_git: Path, tmp_path: Path, scheme: str) -> None:
    result = run_release(project, "rebase", TO, "--from", f"{scheme}{vllm_git}", "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    commit = subprocess.run(
        ["git", "-C", str(vllm_git), "rev-parse", TO], capture_output=True, text=True
    ).stdout.strip()
    assert report["commit"] == commit
    assert report["patches"][0]["status"] == "applies"
    assert report["flashinfer_new"] == fetch(TO, Source.parse("pypi")).flashinfer
    assert run_release(project, "check").returncode == 0


def test_conflict_stops_with_exit_3_and_changes_nothing(project: Path, vllm_git: Path, tmp_path: Path) -> None:
    name = add_conflicting_patch(project)
    assert run_release(project, "check").returncode == 0
    before = snapshot(project)
    result = run_release(project, "rebase", TO, "--from", f"git:{vllm_git}", "--report", str(tmp_path / "r"))
    assert result.returncode == 3, result.stderr
    assert snapshot(project) == before
    report = json.loads((tmp_path / "r" / "rebase-report.json").read_text())
    statuses = {p["name"]: p["status"] for p in report["patches"]}
    assert statuses == {FIX: "applies", name: "conflict"}
    conflict = report["patches"][1]["conflicts"][0]
    assert conflict["file"] == f"{UPSTREAM_SUBTREE}/deepep_ht.py"
    assert "is_scale_swizzled=quant_config.is_scale_swizzled" in conflict["ours"]
    assert "bool(quant_config.is_nvfp4_scale_swizzled)" in conflict["theirs"]
    assert conflict["hunks"] and conflict["hunks"][0].startswith("@@ -")
    work = Path(report["work_dir"])
    assert report["continue_command"] == f"python -m release rebase --continue {work}"
    assert "git -C" in (tmp_path / "r" / "rebase-report.md").read_text()

    # Resolve as a maintainer would: keep upstream's new keyword, add our bool().
    conflicted = work / "repo" / conflict["file"]
    resolved = [
        line
        for line in conflicted.read_text().splitlines(keepends=True)
        if not line.startswith(("<<<<<<<", "=======", ">>>>>>>", "||||||| ")) and "is_nvfp4_scale_swizzled" not in line
    ]
    conflicted.write_text(
        "".join(resolved).replace(
            "is_scale_swizzled=quant_config.is_scale_swizzled,",
            "is_scale_swizzled=bool(quant_config.is_scale_swizzled),",
        )
    )
    subprocess.run(["git", "-C", str(work / "repo"), "add", conflict["file"]], check=True)
    done = run_release(project, "rebase", "--continue", str(work))
    assert done.returncode == 0, done.stderr
    assert not work.exists()
    assert (
        "bool(quant_config.is_scale_swizzled)"
        in (project / "vendor/vllm_fused_moe/prepare_finalize/deepep_ht.py").read_text()
    )
    assert (
        "+                    is_scale_swizzled=bool(quant_config.is_scale_swizzled),"
        in (project / "patches" / name).read_text()
    )
    assert run_release(project, "check").returncode == 0


def test_abort_drops_the_work_dir(project: Path, vllm_git: Path, tmp_path: Path) -> None:
    add_conflicting_patch(project)
    before = snapshot(project)
    result = run_release(project, "rebase", TO, "--from", f"git:{vllm_git}", "--report", str(tmp_path / "r"))
    assert result.returncode == 3
    work = Path(json.loads((tmp_path / "r" / "rebase-report.json").read_text())["work_dir"])
    again = run_release(project, "rebase", TO, "--from", f"git:{vllm_git}")
    assert again.returncode == 2 and "already in progress" in again.stderr
    assert run_release(project, "rebase", "--abort", str(work)).returncode == 0
    assert not work.exists()
    assert snapshot(project) == before


# -------------------------------------------------------------------- bad input


def _corrupt_patch(project: Path) -> None:
    """A hunk that promises three lines more than it holds: the patch's own first header (the line
    numbers are whichever tag the queue is at), its new side's count raised."""
    path = project / "patches" / FIX
    text = path.read_text()
    header = re.search(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@", text, re.MULTILINE)
    assert header is not None, f"{FIX} has no hunk header of the form @@ -a,b +c,d @@"
    old_start, old_count, new_start, new_count = header.groups()
    corrupt = f"@@ -{old_start},{old_count} +{new_start},{int(new_count) + 3} @@"
    path.write_text(text[: header.start()] + corrupt + text[header.end() :])


def _series_names_missing_file(project: Path) -> None:
    with (project / "patches" / "series").open("a") as series:
        series.write("0009-not-there.patch\n")


def _dirty_vendor(project: Path) -> None:
    path = project / "vendor/vllm_fused_moe/prepare_finalize/no_dp_ep.py"
    path.write_text(path.read_text() + "\n# hand edit\n")


@pytest.mark.parametrize(
    "spoil, args, kind, message",
    [
        (None, ["v9.9.9", "--from", "git:{git}"], errors.UnknownTagError, "has no tag v9.9.9"),
        (None, ["banana", "--from", "pypi"], errors.UnknownTagError, "is not a vLLM release tag"),
        # newer: an older tag is refused first
        (None, ["v99.0.999", "--from", "pypi"], errors.UnknownTagError, "no vLLM release 99.0.999"),
        (_corrupt_patch, [TO, "--from", "pypi"], errors.MalformedPatchError, "is corrupt"),
        (_series_names_missing_file, [TO, "--from", "pypi"], errors.MalformedSeriesError, "0009-not-there.patch"),
        (_dirty_vendor, [TO, "--from", "pypi"], errors.DirtyVendorError, "no_dp_ep.py (edited)"),
        (None, [TO, "--from", "dir:{empty}"], errors.SourceError, "has no vllm/model_executor"),
        (None, [TO, "--from", "git:{empty}"], errors.SourceError, "is not a git repository"),
        (None, [TO, "--from", "wheel:{empty}/none.whl"], errors.SourceError, "no wheel at"),
        (None, [TO, "--from", "svn:foo"], errors.SourceError, "unknown source"),
        (
            None,
            [TO, "--from", "wheel:{wheel_from}"],
            errors.VersionProofError,
            f"is vLLM {version_of_tag(FROM)}, not {TO}",
        ),
    ],
)
def test_bad_input_exits_2_with_one_clear_line_and_changes_nothing(
    project: Path,
    vllm_git: Path,
    tmp_path: Path,
    spoil: Callable[[Path], None] | None,
    args: list[str],
    kind: type[errors.ReleaseError],
    message: str,
) -> None:
    if spoil:
        spoil(project)
    empty = tmp_path / "empty"
    empty.mkdir()
    from release.pristine.wheel import pypi_wheel

    fill = {"git": str(vllm_git), "empty": str(empty), "wheel_from": str(pypi_wheel(FROM))}
    before = snapshot(project)
    # A tag PyPI lacks makes the CLI try a download: it must leave nothing in the user's cache.
    result = run_release(project, "rebase", *[a.format(**fill) for a in args], env=private_cache(tmp_path))
    assert result.returncode == 2, (result.stdout, result.stderr)
    error = failed(result)
    assert error.reference == kind.reference and message in error.message and error.hint, result.stderr
    assert snapshot(project) == before
    assert work_leftovers(project) == []


def test_help_documents_sources_and_exit_codes() -> None:
    result = run_release(Path("."), "rebase", "--help")
    assert result.returncode == 0
    for text in ("git+URL", "git:PATH", "dir:PATH", "wheel:PATH", "pypi", "3  conflict", "2  bad input"):
        assert text in result.stdout
