"""`pq carry` keeps the variants it made in step with their common patch, and never touches one made by hand.

Real processes on a copy of the checkout, the line's train tags read from the cached release wheels.
The synthetic 0002 (the shape check, made here) is carried onto the release line whose `[line.maps]`
covers the two-sided module (the first older line, in patches/lines.toml order, that has a map for it);
then 0002 changes and `carry` updates that variant; run again, it is up to date; a variant without
`Carried-From:` (made by hand) is left as it is. The documented loop over every line is test_pq's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_release
from helpers.synthetic import SHAPE_CHECK_PATCH, add_shape_check
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.queue.load import is_head

pytestmark = pytest.mark.network  # the line's train tags: range reads or the cache

TWO_SIDED = "vllm/model_executor/layers/fused_moe/prepare_finalize/flashinfer_nvlink_two_sided.py"


def carry(project: Path, line: str) -> dict[str, object]:
    done = run_release(project, "pq", "carry", SHAPE_CHECK_PATCH, "--line", line, "--json")
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)["lines"]
    assert isinstance(result, dict)
    return result


def test_carry_updates_its_own_variant_when_the_patch_changes_and_leaves_a_hand_made_one(project: Path) -> None:
    layout = Layout(project)
    add_shape_check(project)
    line = next(
        line
        for line in read_lines(layout.lines).lines
        if not is_head(layout, line) and dict(line.maps).get(TWO_SIDED) and len(line.maps) > 1
    )
    variant = line.patch_dir(project) / SHAPE_CHECK_PATCH
    first = carry(project, line.name)
    assert first["result"] == "written" and variant.is_file()
    assert f"Carried-From: {SHAPE_CHECK_PATCH} sha256:" in variant.read_text()
    assert SHAPE_CHECK_PATCH in (line.series_path(project)).read_text().splitlines()
    assert carry(project, line.name)["result"] == "up-to-date"

    common = layout.patches / SHAPE_CHECK_PATCH
    common.write_text(common.read_text().replace("Risk: none", "Risk: an assert on the finalize path"))
    updated = carry(project, line.name)
    assert updated["result"] == "updated", updated
    assert "Risk: an assert on the finalize path" in variant.read_text()
    assert (line.series_path(project)).read_text().splitlines().count(SHAPE_CHECK_PATCH) == 1

    by_hand = Patch.load(variant, line.prefixes).without_trailer("Carried-From")
    variant.write_text(by_hand.text)
    left = carry(project, line.name)
    assert left["result"] == "hand-made" and variant.read_text() == by_hand.text
