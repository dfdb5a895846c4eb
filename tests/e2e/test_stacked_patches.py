"""The documented loop takes a patch stacked on 0001's file onto every tag of the train in one pass.

Three patches, two on one file: 0001 (the series' own), a check in the one-sided `finalize` (0001's
file, its context two lines from code that differs between the head line's tags, so on those tags
it only merges 3-way, from the blob 0001 leaves on the head's pristine tree) and a shape check in
the two-sided `finalize`. As docs/patch-queue.md writes it: `pq carry --all` (variants where they
apply on every tag of a line, all written in one journaled swap; the head line's series replayed on
its every train tag), `pq skip`
for each line it names, `check`, then `train add --all`, which replays every train tag; under a
HOME whose ~/.gitconfig sets diff.noprefix and format.signOff. The same mechanism on small
synthetic trees, two and three patches on one file: tests/cli/test_stacked_patches.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import run_release
from helpers.synthetic import SHAPE_CHECK, add_patch
from helpers.train import load_train
from release.core.faults import FAULT_ENV
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.series import Series
from release.pristine.wheel import cache_dir
from release.queue.load import is_head

pytestmark = pytest.mark.network  # every train tag: the cached release wheels, or range reads

STACKED = "0002-finalize-ep-size-check.patch"
OTHER = "0003-shape-check.patch"
EP_SIZE = "        ep_size = self.all2all_manager.world_size\n"


def hostile_home(tmp_path: Path) -> dict[str, str]:
    """A HOME whose ~/.gitconfig differs from git's defaults; the release wheel cache stays the user's (it lives
    under the real HOME): without it `train add --all` reads every train tag from the package index again."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[diff]\n\tnoprefix = true\n\tcontext = 5\n[format]\n\tsignOff = true\n[am]\n\tthreeWay = false\n"
    )
    cache = str(cache_dir().parent)
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "VLLM_FUSED_MOE_CACHE": cache}


def test_a_patch_stacked_on_0001s_file_reaches_every_train_tag_in_one_pass(project: Path, tmp_path: Path) -> None:
    env = hostile_home(tmp_path)
    queue = Series.load(project / "patches" / "series").names  # what the head carries before the two
    vendor = project / "vendor" / "vllm_fused_moe" / "prepare_finalize"
    add_patch(project, STACKED, "flashinfer_nvlink_one_sided.py", EP_SIZE,
              EP_SIZE + '        assert ep_size > 0, "finalize: no EP ranks"\n',
              "fused_moe: check the EP size in finalize", lines_skip=False)  # fmt: skip
    two_sided = (vendor / "flashinfer_nvlink_two_sided.py").read_text()
    match = re.search(r"    def finalize\(.*?\n\s*\) -> None:\n", two_sided, re.S)
    assert match is not None
    add_patch(project, OTHER, "flashinfer_nvlink_two_sided.py", match.group(0), match.group(0) + SHAPE_CHECK,
              "fused_moe: shape check in finalize", lines_skip=False)  # fmt: skip

    # One journaled swap for the whole command (never 0002 carried and 0003 not): a kill armed for a
    # second swap's staging is never reached.
    carried = run_release(project, "pq", "carry", "--all", "--json", env={**env, FAULT_ENV: "swap:staged@2"})
    assert carried.returncode == 0, carried.stdout + carried.stderr
    report = json.loads(carried.stdout)
    assert [r["patch"] for r in report["reports"]][1:] == [STACKED, OTHER]
    head = report["reports"][-1]["head"]
    assert head["result"] == "replays", head
    for name, lines in report["silent"].items():
        for line in lines:
            skipped = run_release(project, "pq", "skip", name, "--line", line, "--reason", "the test's", env=env)
            assert skipped.returncode == 0, skipped.stderr
    written = [p for r in report["reports"] for p in r["written"] if p.endswith(".patch")]
    for path in written:
        text = (project / path).read_text()
        assert "Signed-off-by" not in text and "\ndiff --git a/" in text, path

    assert run_release(project, "check", env=env).returncode == 0
    added = run_release(project, "train", "add", "--all", env=env)
    assert added.returncode == 0, added.stdout + added.stderr

    layout = Layout(project)
    head_line = next(line.name for line in read_lines(layout.lines).lines if is_head(layout, line))
    train = load_train(layout)
    on_head = [e for e in train.entries if e.line == head_line]
    assert on_head and all(e.patches == (*queue, STACKED, OTHER) for e in on_head), [
        (e.tag, e.patches) for e in on_head
    ]
    # Every older line carries what its series says: a carried variant of the stacked patch is replayed too.
    carried_to = {p.split("/")[2] for p in written if p.endswith(STACKED)}
    for entry in train.entries:
        if entry.line in carried_to:
            assert STACKED in entry.patches, (entry.tag, entry.patches)
