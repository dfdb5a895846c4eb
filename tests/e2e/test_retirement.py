"""A retired patch stays alive for the tags before its upstream release, with two patches in play.

The issue's story, as real processes on a copy of the checkout with the real release wheels (cached):
a downstream 0002 (the shape check, made here) joins the queue's bug fix (helpers/fix.py); `rebase` onto
the first release that has the fix's change retires it at the head, and then every older train tag still
replays it: `train check` passes for the whole train, `train add` of an older tag applies the fix, and
`build --tag` of it ships a wheel whose build info carries the fix's bug. Where the data would make a tag
lose the fix (its Applied-Upstream set to that very tag by hand), `train add`, `build` and `publish` refuse, naming the
bug and the tag. No release is named here: the tags come from the train and the scan data.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from helpers import run_release, snapshot, tag_facts
from helpers.failure import failed
from helpers.fix import fix_patch
from helpers.synthetic import SHAPE_CHECK_PATCH, add_shape_check
from helpers.train import load_train
from release.core.errors import MissingFixError
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.model.lines import read_lines
from release.model.series import EntryKind, Series
from release.queue.load import is_head, older

pytestmark = pytest.mark.network  # every train tag's release wheel: the cache, or the package index once

FIX = fix_patch().name  # the queue's first bug fix (helpers/fix.py), whatever its name


def build_info(dist: Path) -> dict[str, Any]:
    [wheel] = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        info: dict[str, Any] = json.loads(archive.read("vllm_fused_moe/_build_info.json"))
    return info


def test_retire_at_the_head_then_re_record_and_build_an_older_tag_with_the_fix_still_in_it(
    project: Path, tmp_path: Path
) -> None:
    layout = Layout(project)
    fixed = tag_facts.first_fixed()
    document = json.loads(layout.affected_json.read_text())
    [(bug, info)] = document["bugs"].items()
    assert info["patches"] == [FIX]

    # Two patches: 0002 is downstream; the older lines do without it (carrying it is test_pq's, as documented).
    add_shape_check(project)
    head_line = next(line for line in read_lines(layout.lines).lines if is_head(layout, line))
    for line in read_lines(layout.lines).lines:
        if line.name != head_line.name:
            said = run_release(project, "pq", "skip", SHAPE_CHECK_PATCH, "--line", line.name, "--reason", "a test")
            assert said.returncode == 0, said.stderr
    on_head_line = [e.tag for e in load_train(layout).entries if e.line == head_line.name]
    recorded = run_release(project, "train", "add", *on_head_line)
    assert recorded.returncode == 0, recorded.stderr

    rebased = run_release(project, "rebase", fixed, "--from", "pypi", "--report", str(tmp_path / "report"))
    assert rebased.returncode == 0, rebased.stderr
    entries = Series.load(layout.series).entries
    assert [(e.kind, e.name) for e in entries] == [
        (EntryKind.RETIRED, FIX),
        (EntryKind.PATCH, SHAPE_CHECK_PATCH),
    ]
    train = load_train(layout)
    before_fix = [t for t in train.tags if older(t, fixed)]
    [retirement] = json.loads((tmp_path / "report" / "rebase-report.json").read_text())["retirements"]
    assert retirement["applied_upstream"] == fixed and retirement["keeps_replaying"] == before_fix
    markdown = (tmp_path / "report" / "rebase-report.md").read_text()
    assert f"every train tag older than {fixed} still replays it: {', '.join(before_fix)}" in markdown
    head = train.get(fixed)
    assert head is not None and head.patches == (SHAPE_CHECK_PATCH,)  # the head carries downstream changes only

    checked = run_release(project, "train", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr  # every older tag still replays the fix

    tag = max((t for t in on_head_line if t in before_fix), key=lambda t: before_fix.index(t))
    added = run_release(project, "train", "add", tag)
    assert added.returncode == 0 and f"{FIX.removesuffix('.patch')} applies" in added.stdout, added.stderr
    built = run_release(project, "build", "--tag", tag, "--out", str(tmp_path / "dist"))
    assert built.returncode == 0, built.stderr
    carried = build_info(tmp_path / "dist")["patches"]
    assert isinstance(carried, list)
    assert [(p["name"], p["bug"]) for p in carried] == [(FIX, bug), (SHAPE_CHECK_PATCH, "")]

    # Applied-Upstream moved back to `tag` by hand: `tag` would no longer replay the fix, though it has the bug.
    retired = layout.retired / FIX
    retired.write_text(retired.read_text().replace(f"Applied-Upstream: {fixed}", f"Applied-Upstream: {tag}"))
    before = snapshot(project)
    affected = f"vLLM {tag} (line {head_line.name}) is affected by {bug} ({info['title']})"
    why = f"{affected} (patches/train.toml, the scan data), but its replay would not fix it"
    refused = run_release(project, "train", "add", tag)
    error = failed(refused)
    assert refused.returncode == 2 and error.reference == MissingFixError.reference, refused.stderr
    assert error.message.startswith(f"not adding {tag}: {why}"), error
    refused = run_release(project, "build", "--tag", tag, "--out", str(tmp_path / "none"))
    error = failed(refused)
    assert refused.returncode == 2 and error.reference == MissingFixError.reference, refused.stderr
    assert error.message.startswith(f"not building {tag}: {why}"), error
    assert snapshot(project) == before and not (tmp_path / "none").exists()

    # A wheel without the fix for `tag`, as a tool that knew nothing of the bug made one (neither the scan data
    # nor the train's record of the tag names it); publish refuses it by the scan data.
    scanned = layout.affected_json.read_text()
    blind = json.loads(scanned)
    blind["releases"][version_of_tag(tag)]["bugs"] = {}
    layout.affected_json.write_text(json.dumps(blind))
    train = load_train(layout)
    entry = train.get(tag)
    assert entry is not None and bug in entry.bugs  # the train knows which bugs the tag has
    layout.train.write_text(train.with_entry(replace(entry, bugs=())).dumps())
    assert run_release(project, "train", "add", tag).returncode == 0
    built = run_release(project, "build", "--tag", tag, "--out", str(tmp_path / "blind"))
    assert built.returncode == 0, built.stderr
    assert [p["name"] for p in build_info(tmp_path / "blind")["patches"]] == [SHAPE_CHECK_PATCH]
    layout.affected_json.write_text(scanned)
    published = run_release(project, "publish", str(tmp_path / "blind"), str(tmp_path / "index"))
    assert published.returncode == 2, published.stdout + published.stderr
    why = f"{affected} (the scan data), but its replay would not fix it"
    [blind_wheel] = (tmp_path / "blind").glob("*.whl")
    assert f"not publishing {blind_wheel.name}: {why}" in published.stderr
    assert not (tmp_path / "index").exists()
