"""A line's `skip` of a bug's patch is a claim: `check` and `train add` refuse it without proof (issue 35).

The proof is a clean pass of the bug's test on the line's pristine release, which only an interpreter with
torch can run (`python -m release evidence`, release/evidence/skips.py); here the gates that read it, on a
copy of the real queue whose flashinfer_a2a line skips its bug fix (helpers/fix.py) in place of its variant.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from helpers.fix import fix_patch, fix_variant
from helpers.train import load_train
from release.cli import main
from release.core.errors import UnprovenSkipError
from release.core.layout import Layout
from release.evidence import skips
from release.queue.skip_proof import proof_path, skipped_bug_tests, tool_digest, unproven_skips
from release.queue.snapshot import Checkout
from release.queue.status import refuse_train_missing_fixes

LINE = "flashinfer_a2a"
COMMON = fix_patch().name  # the queue's first bug fix, which every line carries


def skip_the_fix(project: Path) -> Layout:
    """The a2a line's series skips the fix ("mistake"), the bugs its tags recorded are emptied by hand (what a
    merge-conflict resolution can do) and the scan data lists none of them (a scan of a later range): no record
    says the line's releases have the bug any more, and only the evidence can."""
    layout = Layout(project)
    series = project / "patches" / "lines" / LINE / "series"
    variant = fix_variant(LINE, project)
    assert variant.parent == series.parent, f"{LINE} takes {COMMON} as it is: this test needs a variant"
    series.write_text(re.sub(rf"(?m)^{re.escape(variant.name)}\b.*$", f"skip {COMMON}: mistake", series.read_text()))
    variant.unlink()
    on_line = {e.tag for e in load_train(layout).entries if e.line == LINE}
    text = layout.train.read_text()
    for tag in on_line:
        text = re.sub(rf'(tag = "{re.escape(tag)}"(?:\n(?!\[\[).*)*?\nbugs = )\[[^\]]*\]', r"\1[]", text)
    layout.train.write_text(text)
    data = json.loads(layout.affected_json.read_text())
    for tag in on_line:
        del data["releases"][tag.removeprefix("v")]
    layout.affected_json.write_text(json.dumps(data, indent=2) + "\n")
    assert all(not e.bugs for e in load_train(layout).entries if e.line == LINE)
    return layout


def test_check_refuses_a_skip_of_a_bug_patch_without_proof_naming_bug_tag_and_line(project: Path) -> None:
    layout = skip_the_fix(project)
    [test] = skipped_bug_tests(Checkout.load(layout), LINE)
    with pytest.raises(UnprovenSkipError) as refused:
        refuse_train_missing_fixes(Checkout.load(layout))
    said = str(refused.value)
    first = next(e.tag for e in load_train(layout).entries if e.line == LINE)
    assert said.startswith(f"check: bug {test.bug}") and f"on vLLM {first} (line {LINE})" in said
    assert f"skips {COMMON}" in said and test.path in said
    assert f"evidence --tag {first}" in (refused.value.hint or "")


def test_train_add_onto_a_line_that_skips_the_fix_refuses_and_leaves_the_train(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = skip_the_fix(project)
    tags = [e.tag for e in load_train(layout).entries if e.line == LINE]
    before = layout.train.read_bytes()
    assert main(["--root", str(project), "train", "add", *tags, "--line", LINE]) == 2
    err = capsys.readouterr().err
    assert f"not adding {tags[0]}: bug " in err and f"(line {LINE})" in err
    assert layout.train.read_bytes() == before


def test_a_proof_stands_only_for_the_release_wheel_test_and_tool_it_ran_on(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    layout = skip_the_fix(project)
    entry = next(e for e in load_train(layout).entries if e.line == LINE)
    [test] = skipped_bug_tests(Checkout.load(layout), LINE)
    assert [u.test for u in unproven_skips(Checkout.load(layout), entry.tag, LINE, entry.wheel_sha256)] == [test]
    # What `evidence` writes after a clean pass (its run is tests/e2e's): read back for that release wheel only.
    run = {"result": "passed", "summary": "1 passed", "key": "run"}
    skips._write(entry.tag, test, tool_digest(), "python", "vllm.whl", entry.wheel_sha256, run)
    assert unproven_skips(Checkout.load(layout), entry.tag, LINE, entry.wheel_sha256) == []
    [other] = unproven_skips(Checkout.load(layout), entry.tag, LINE, "0" * 64)
    assert "another release wheel" in other.why
    # Another test text (its digest) is another key: the old proof stands for nothing.
    ours = project / "patches" / "upstream-tests" / test.path
    ours.write_text(ours.read_text() + "# changed\n")
    assert len(unproven_skips(Checkout.load(layout), entry.tag, LINE, entry.wheel_sha256)) == 1


def test_a_head_line_split_into_a_line_that_skips_the_fix_is_refused_at_check(project: Path) -> None:
    """Issue 35, path 2: the head line split the documented way (docs/patch-queue.md: a new `[[line]]` before the
    head's, the same modules) into a line for the head line's older tags whose series skips the fix; those tags moved
    to it, their records re-made without the bug (a replay that skips the fix applies nothing) and the scan data
    silent about them. Every gate passed; now check refuses naming the bug, a moved tag and the new line."""
    layout = Layout(project)
    train = load_train(layout)
    head = next(e for e in reversed(train.entries) if e.line != LINE).line
    old = [e for e in train.entries if e.line == head][:2]
    split = f"{head}_split"
    text = layout.lines.read_text()
    first = text.index("[[line]]")
    block = (
        f'[[line]]\nname = "{split}"\nmodules = ["vllm/model_executor/layers/fused_moe/prepare_finalize/"]\n'
        f'markers = ["vllm/model_executor/layers/fused_moe/prepare_finalize/flashinfer_nvlink_two_sided.py"]\n'
        f'series = "patches/lines/{split}/series"\n\n'
    )
    layout.lines.write_text(text[:first] + block + text[first:])
    (project / "patches" / "lines" / split).mkdir()
    (project / "patches" / "lines" / split / "series").write_text(f"skip {COMMON}: mistake\n")
    for entry in old:
        train = train.with_entry(dataclasses.replace(entry, line=split, bugs=()))
    layout.train.write_text(train.dumps())
    data = json.loads(layout.affected_json.read_text())
    for entry in old:
        del data["releases"][entry.tag.removeprefix("v")]
    layout.affected_json.write_text(json.dumps(data, indent=2) + "\n")
    [test] = skipped_bug_tests(Checkout.load(layout), split)
    with pytest.raises(UnprovenSkipError) as refused:
        refuse_train_missing_fixes(Checkout.load(layout))
    assert f"check: bug {test.bug}" in str(refused.value)
    assert f"on vLLM {old[0].tag} (line {split}): the line's series skips {COMMON}" in str(refused.value)


def test_a_proof_written_by_anything_but_evidence_proves_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 43: a hostile test wrote skip proofs for the genuine test, and check went from exit 2 to 0. A proof
    stands only with the MAC `evidence` gave it under the cache's secret (release/core/seal.py)."""
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    layout = skip_the_fix(project)
    entry = next(e for e in load_train(layout).entries if e.line == LINE)
    [test] = skipped_bug_tests(Checkout.load(layout), LINE)
    run = {"result": "passed", "summary": "1 passed", "key": "run"}
    skips._write(entry.tag, test, tool_digest(), "python", "vllm.whl", entry.wheel_sha256, run)
    path = proof_path(entry.tag.removeprefix("v"), test)
    genuine = json.loads(path.read_text())
    # What a process without the secret can write: the same record, its MAC left out or made up.
    for forged in ({k: v for k, v in genuine.items() if k != "mac"}, {**genuine, "mac": "0" * 64}):
        path.write_text(json.dumps(forged))
        [unproven] = unproven_skips(Checkout.load(layout), entry.tag, LINE, entry.wheel_sha256)
        assert "no valid MAC" in unproven.why and str(path) in unproven.why
    path.write_text(json.dumps(genuine))
    assert unproven_skips(Checkout.load(layout), entry.tag, LINE, entry.wheel_sha256) == []
