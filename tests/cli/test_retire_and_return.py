"""A retired patch is never lost: two rebases one after the other, as the repository lock serialises them.

The issue's story: rebases onto v0.22.0 (which has the fix's change) and onto v0.21.0 (which does not)
ran at once; the lock made one wait for the other, and the head ended on v0.21.0 with the fix retired, an
affected head without its fix. Here, offline, with two release trees made from vendor/: NEXT_TAG holds
every patch's change (vendor/'s own files), OTHER_TAG (older) is the pristine tree. The second rebase starts
from the tree the first left: the queue is retired there, and since OTHER_TAG is older than its
Applied-Upstream it replays each patch and brings it back into patches/series, and both reports say what
that means for the train. Whatever the queue holds: its patches are read from patches/series.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_release
from helpers.synthetic import NEXT_TAG, make_dir, pristine
from release.core.layout import Layout, read_tree
from release.model.series import EntryKind, Series

OTHER_TAG = NEXT_TAG.rsplit(".", 1)[0] + ".98"  # newer than the head, older than NEXT_TAG


def test_a_rebase_onto_an_older_tag_after_one_that_retired_a_patch_brings_the_fix_back(
    project: Path, tmp_path: Path
) -> None:
    layout = Layout(project)
    names = Series.load(layout.series).names
    original = {name: (layout.patches / name).read_bytes() for name in names}
    vendor = read_tree(layout.subtree)
    fixed = f"dir:{make_dir(tmp_path / 'fixed', vendor, NEXT_TAG.removeprefix('v'))}"
    older = f"dir:{make_dir(tmp_path / 'older', pristine(project), OTHER_TAG.removeprefix('v'))}"

    first = run_release(project, "rebase", NEXT_TAG, "--from", fixed, "--report", str(tmp_path / "r1"))
    assert first.returncode == 0, first.stderr
    series = Series.load(layout.series)
    assert [(e.kind, e.name) for e in series.entries] == [(EntryKind.RETIRED, name) for name in names]
    report = json.loads((tmp_path / "r1" / "rebase-report.json").read_text())
    assert [r["patch"] for r in report["retirements"]] == names
    for name, retired in zip(names, report["retirements"], strict=True):
        assert f"Applied-Upstream: {NEXT_TAG}" in (layout.retired / name).read_text()
        assert (retired["applied_upstream"], retired["change"]) == (NEXT_TAG, "retired")
        assert retired["keeps_replaying"] and NEXT_TAG not in retired["keeps_replaying"]
    assert "## What the retirement means for the train" in (tmp_path / "r1" / "rebase-report.md").read_text()

    second = run_release(
        project, "rebase", OTHER_TAG, "--from", older, "--allow-older", "--report", str(tmp_path / "r2")
    )
    assert second.returncode == 0, second.stderr
    assert Series.load(layout.series).names == names
    for name in names:
        assert f"{name} is back in patches/series" in second.stderr
        assert not (layout.retired / name).exists()
        assert (layout.patches / name).read_bytes() == original[name]  # back as it was, its Applied-Upstream gone
    # pristine + the series: the same files as before the two rebases, so every fix is there again
    assert read_tree(layout.subtree) == vendor
    assert run_release(project, "check").returncode == 0
    returned = json.loads((tmp_path / "r2" / "rebase-report.json").read_text())["retirements"]
    assert [(r["patch"], r["change"], r["applied_upstream"]) for r in returned] == [
        (name, "returned", NEXT_TAG) for name in names
    ]
