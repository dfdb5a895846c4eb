"""A line's variant that needs a hand: `pq import --line LINE`, resolve with plain git, `pq export`.

Offline, as real processes with real git, on a copy of the checkout whose train is synthetic `dir:`
sources: the head's tag (its pristine tree, so `pq carry` replays the head line with no network) and
an older tag on a line of the test's own (the head's modules, where `mori.py`'s `import torch` line
differs). A common patch on that very line neither applies nor merges there: `pq carry` names the
line; `pq import --line` stops at it with git's conflict markers (exit 3); the test resolves it with
git, `git am --continue`, and `pq export` writes the variant (Varies:, Carried-From:) and its series
entry; `check` passes, and `pq carry` finds the variant up to date.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from helpers import run_release
from helpers.failure import failed
from helpers.fix import fix_patch
from helpers.synthetic import SUBTREE, add_patch, make_dir, patch_message, pristine
from helpers.train import load_train
from release.core.errors import UnprovenSkipError
from release.core.git import WorkRepo
from release.core.layout import Layout, read_tree
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.series import Series
from release.model.train import Train, TrainEntry
from release.model.tree import UpstreamTree
from release.queue.gates import fingerprint

LINE, OLD_TAG = "hand_variant", "v0.1.0"
COMMON = "0002-mori-first.patch"
OLDER = "import torch  # the older tag's own comment\n"


def synthetic_train(project: Path, tmp_path: Path, mori_only: bool = False) -> None:
    """patches/train.toml of two `dir:` tags: the older one on LINE, then the head's. `mori_only`: LINE's
    modules are mori.py alone (it lacks every other file of the head's package, and so the queue's patches,
    which it skips)."""
    layout = Layout(project)
    head_files = pristine(project)
    old_files = {**head_files, "mori.py": head_files["mori.py"].replace(b"import torch\n", OLDER.encode(), 1)}
    head_tag = Pin.load(layout.upstream_toml).tag
    head = load_train(layout).get(head_tag)
    assert head is not None
    entries = []
    # The queue's patches leave mori.py as it is: the older tag's patched files are the head's, its own mori.py kept.
    old_patched = {**head.patched, "mori.py": hashlib.sha256(old_files["mori.py"]).hexdigest()}
    for tag, files, line, patched in (
        (OLD_TAG, old_files, LINE, old_patched),
        (head_tag, head_files, head.line, head.patched),
    ):
        source = f"dir:{make_dir(tmp_path / tag, files, tag.removeprefix('v'))}"
        if mori_only and line == LINE:
            files = {"mori.py": files["mori.py"]}
            patched = {"mori.py": patched["mori.py"]}
        entries.append(TrainEntry.of(UpstreamTree(tag, source, files), patched, line, source))
    layout.train.write_text(Train(tuple(entries)).dumps())
    modules = f"{SUBTREE}/mori.py" if mori_only else f"{SUBTREE}/"
    with layout.lines.open("a") as lines:
        lines.write(
            f'\n[[line]]\nname = "{LINE}"\nmodules = ["{modules}"]\nmarkers = ["{SUBTREE}/mori.py"]\n'
            f'series = "patches/lines/{LINE}/series"\n'
        )
    folder = layout.patches / "lines" / LINE
    folder.mkdir()
    said = "skip {}: the line has none of its files\n" if mori_only else "take {}\n"
    (folder / "series").write_text("".join(said.format(name) for name in Series.load(layout.series).names))


def test_a_variant_by_hand_imported_resolved_with_git_and_exported(project: Path, tmp_path: Path) -> None:
    synthetic_train(project, tmp_path)
    add_patch(project, COMMON, "mori.py", "import torch\n", "import torch  # first\n", "mori: first")
    series = project / "patches" / "lines" / LINE / "series"
    series.write_text(series.read_text().replace(f"skip {COMMON}: a test's patch of the head line only\n", ""))

    carried = run_release(project, "pq", "carry", COMMON, "--line", LINE, "--json")
    assert carried.returncode == 0, carried.stderr
    report = json.loads(carried.stdout)
    assert report["silent"] == [LINE], report
    assert "conflicts on " + OLD_TAG in report["lines"][0]["detail"], report

    work = tmp_path / "line-tree"
    head_line = load_train(Layout(project)).entries[-1].line
    refused = run_release(project, "pq", "import", "--line", head_line, "--dir", str(work))
    assert refused.returncode == 2 and "is the head line" in refused.stderr, refused.stderr
    assert not work.exists()
    imported = run_release(project, "pq", "import", "--line", LINE, "--dir", str(work))
    assert imported.returncode == 3, imported.stdout + imported.stderr
    assert f"{COMMON} does not merge on {OLD_TAG}" in imported.stdout, imported.stdout
    repo = WorkRepo(work)
    assert repo.unmerged_paths() == [f"{SUBTREE}/mori.py"]
    conflicted = (work / SUBTREE / "mori.py").read_text()
    assert "<<<<<<<" in conflicted and OLDER in conflicted and "import torch  # first\n" in conflicted

    resolved = (tmp_path / OLD_TAG / SUBTREE / "mori.py").read_text().replace(OLDER, "import torch  # first, older\n")
    (work / SUBTREE / "mori.py").write_text(resolved)
    repo.run("add", f"{SUBTREE}/mori.py")
    repo.run("am", "--continue")

    exported = run_release(project, "pq", "export", "--dir", str(work))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    variant = Patch.load(project / "patches" / "lines" / LINE / COMMON)
    common = Patch.load(project / "patches" / COMMON)
    assert variant.trailers["Varies"] == COMMON
    assert variant.trailers["Carried-From"] == fingerprint(common)
    assert "+import torch  # first, older" in variant.text
    assert series.read_text().splitlines()[-1] == COMMON  # after the line's takes of the queue, as carry puts it

    checked = run_release(project, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    again = run_release(project, "pq", "carry", COMMON, "--line", LINE, "--json")
    assert json.loads(again.stdout)["lines"][0]["result"] == "up-to-date", again.stdout


TWO_FILES = "0002-mori-and-two-sided.patch"
TWO_SIDED_ONLY = "0003-two-sided-only.patch"


def add_two_file_patch(project: Path) -> None:
    """A common patch that changes mori.py and the two-sided module (helpers.synthetic.add_patch's way, for two
    files): its mail, its series line, vendor/ patched, a `skip` in every older line's series."""
    vendor = project / "vendor" / "vllm_fused_moe" / "prepare_finalize"
    work = WorkRepo.create(project.parent / "two-files")
    base = work.commit_subtree(read_tree(vendor), "vendor/ as it is")
    mori, two_sided = work.subtree / "mori.py", work.subtree / "flashinfer_nvlink_two_sided.py"
    mori.write_text(mori.read_text() + "# mori too\n")  # at the end: it applies on the older tag as it is
    two_sided.write_text(two_sided.read_text() + "# two-sided too\n")
    work.run("add", "--all")
    work.run("commit", "-q", "-m", patch_message("mori: first, and two-sided"), fixed_date=True)
    [mail] = work.export(base, project.parent / "two-files-out")
    (project / "patches" / TWO_FILES).write_text(mail.read_text())
    with (project / "patches" / "series").open("a") as series:
        series.write(TWO_FILES + "\n")
    for line_series in sorted((project / "patches" / "lines").glob("*/series")):
        with line_series.open("a") as series:
            series.write(f"skip {TWO_FILES}: a test's patch of the head line only\n")
    for changed in (mori, two_sided):
        (vendor / changed.name).write_bytes(changed.read_bytes())


def checked_up_to_the_skip_of_the_fix(project: Path) -> None:
    """`check` passes every gate up to the last: LINE skips the fix (a `Bug:` patch; it has none of its files), a
    claim no run proves for the synthetic tag (no release wheel to run its test on), so `check` refuses that alone."""
    checked = run_release(project, "check")
    assert checked.returncode == 2, checked.stdout + checked.stderr
    common = fix_patch(project).name
    error = failed(checked)  # that refusal alone
    assert error.reference == UnprovenSkipError.reference and TWO_FILES not in checked.stderr, checked.stderr
    assert f"on vLLM {OLD_TAG} (line {LINE}): the line's series skips {common}, but no run" in error.message, error


def test_a_line_without_one_of_the_patchs_files_takes_the_parts_it_has_through_the_tool(
    project: Path, tmp_path: Path
) -> None:
    synthetic_train(project, tmp_path, mori_only=True)
    add_two_file_patch(project)
    series = project / "patches" / "lines" / LINE / "series"
    series.write_text(series.read_text().replace(f"skip {TWO_FILES}: a test's patch of the head line only\n", ""))
    assert run_release(project, "check").returncode == 2  # the line is silent about it

    work = tmp_path / "line-tree"
    imported = run_release(project, "pq", "import", "--line", LINE, "--dir", str(work))
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert f"{TWO_FILES}: the line has no counterpart of {SUBTREE}/flashinfer_nvlink_two_sided.py" in imported.stdout
    exported = run_release(project, "pq", "export", "--dir", str(work))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    variant = Patch.load(project / "patches" / "lines" / LINE / TWO_FILES, (f"{SUBTREE}/mori.py",))
    assert variant.files == [f"{SUBTREE}/mori.py"] and variant.trailers["Varies"] == TWO_FILES
    assert variant.trailers["Carried-From"] == fingerprint(Patch.load(project / "patches" / TWO_FILES))
    checked_up_to_the_skip_of_the_fix(project)

    # A patch with nothing on the line, skipped there; a commit of the maintainer's own in the line's work tree,
    # named after it, is exported as the line's hand-made variant in place of the skip.
    add_patch(project, TWO_SIDED_ONLY, "flashinfer_nvlink_two_sided.py", "# two-sided too\n", "# two-sided only\n",
              "two-sided only")  # fmt: skip
    again = run_release(project, "pq", "import", "--line", LINE, "--dir", str(work), "--force")
    assert again.returncode == 0, again.stdout + again.stderr
    repo = WorkRepo(work)
    mori = work / SUBTREE / "mori.py"
    mori.write_text(mori.read_text() + "# the line's own part of 0003\n")
    repo.run("commit", "-q", "-a", "-m", patch_message("mori: the line's part of two-sided only") +
             f"Patch-Name: {TWO_SIDED_ONLY}\n", fixed_date=True)  # fmt: skip
    exported = run_release(project, "pq", "export", "--dir", str(work))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    own = Patch.load(project / "patches" / "lines" / LINE / TWO_SIDED_ONLY, (f"{SUBTREE}/mori.py",))
    assert own.trailers["Varies"] == TWO_SIDED_ONLY and "Carried-From" not in own.trailers
    assert series.read_text().splitlines()[-2:] == [TWO_FILES, TWO_SIDED_ONLY]
    checked_up_to_the_skip_of_the_fix(project)
