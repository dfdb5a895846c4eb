"""A retired patch is never lost: two rebases one after the other, as the repository lock serialises them.

The issue's story: rebases onto v0.22.0 (which has patch 0001's change) and onto v0.21.0 (which does not)
ran at once; the lock made one wait for the other, and the head ended on v0.21.0 with 0001 retired, an
affected head without its fix. Here, offline, with two release trees made from vendor/: NEXT_TAG holds
0001's change (vendor/'s own files), OTHER_TAG (older) is the pristine tree. The second rebase starts from
the tree the first left: 0001 is retired there, and since OTHER_TAG is older than its Applied-Upstream it
replays it and brings it back into patches/series, and both reports say what that means for the train.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_release
from helpers.synthetic import NEXT_TAG, make_dir, pristine
from release.core.layout import Layout, read_tree
from release.model.series import EntryKind, Series

OTHER_TAG = NEXT_TAG.rsplit(".", 1)[0] + ".98"  # newer than the head, older than NEXT_TAG
PATCH_0001 = "0001-flashinfer-nvlink-output-is-reduced.patch"


def test_a_rebase_onto_an_older_tag_after_one_that_retired_a_patch_brings_the_fix_back(
    project: Path, tmp_path: Path
) -> None:
    layout = Layout(project)
    original = (layout.patches / PATCH_0001).read_bytes()
    vendor = read_tree(layout.subtree)
    fixed = f"dir:{make_dir(tmp_path / 'fixed', vendor, NEXT_TAG.removeprefix('v'))}"
    older = f"dir:{make_dir(tmp_path / 'older', pristine(project), OTHER_TAG.removeprefix('v'))}"

    first = run_release(project, "rebase", NEXT_TAG, "--from", fixed, "--report", str(tmp_path / "r1"))
    assert first.returncode == 0, first.stderr
    series = Series.load(layout.series)
    assert [(e.kind, e.name) for e in series.entries] == [(EntryKind.RETIRED, PATCH_0001)]
    assert f"Applied-Upstream: {NEXT_TAG}" in (layout.retired / PATCH_0001).read_text()
    report = json.loads((tmp_path / "r1" / "rebase-report.json").read_text())
    [retired] = report["retirements"]
    assert (retired["patch"], retired["applied_upstream"], retired["change"]) == (PATCH_0001, NEXT_TAG, "retired")
    assert retired["keeps_replaying"] and NEXT_TAG not in retired["keeps_replaying"]
    assert "## What the retirement means for the train" in (tmp_path / "r1" / "rebase-report.md").read_text()

    second = run_release(
        project, "rebase", OTHER_TAG, "--from", older, "--allow-older", "--report", str(tmp_path / "r2")
    )
    assert second.returncode == 0, second.stderr
    assert f"{PATCH_0001} is back in patches/series" in second.stderr
    assert Series.load(layout.series).names == [PATCH_0001]
    assert not (layout.retired / PATCH_0001).exists()
    assert (layout.patches / PATCH_0001).read_bytes() == original  # back as it was, its Applied-Upstream gone
    assert read_tree(layout.subtree) == vendor  # pristine + 0001: the same files as before the two rebases
    assert run_release(project, "check").returncode == 0
    two_sided = (layout.subtree / "flashinfer_nvlink_two_sided.py").read_text()
    assert "return True" in two_sided.split("def output_is_reduced", 1)[1].split("def ", 1)[0]  # the fix is there
    [returned] = json.loads((tmp_path / "r2" / "rebase-report.json").read_text())["retirements"]
    assert (returned["change"], returned["applied_upstream"]) == ("returned", NEXT_TAG)
