"""A tag's patch level only goes up: patches/train.toml records it per tag with the digest of what the tag
carries, `train add` raises it when that changes (a patch added, changed, dropped or retired), `build` takes it
and refuses a tag whose carried patches the train does not record, and `publish` refuses a version at or below
the index's newest for the tag when its files differ, so the requirements file never keeps pinning an older
wheel over a change."""

from __future__ import annotations

import argparse
import re
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import snapshot
from helpers.synthetic import demo_wheel
from helpers.train import load_train
from release.core.errors import (
    BadPatchLevelError,
    PatchLevelNotAboveError,
    TrainFileError,
    UnrecordedChangeError,
)
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.train import Train, TrainEntry, digest_carried
from release.overlay import build_cli
from release.overlay.build import PROJECT
from release.overlay.index import preflight, publish
from release.queue.gates import refuse_unrecorded
from release.queue.load import tag_patches
from release.train.add import save

FIX = Patch("0001-fix.patch", "From 0 Mon Sep 17 00:00:00 2001\nSubject: a fix\n\nWhy: one.\n\nBug: #1 a bug\n")
SHAPE = Patch(
    "0002-shape.patch", "From 0 Mon Sep 17 00:00:00 2001\nSubject: a check\n\nWhy: two.\n\nDownstream: ours\n"
)


def recorded(*patches: Patch, level: int = 0) -> TrainEntry:
    """An entry as `train add` makes it from a replay that applied `patches` (before `after`)."""
    return TrainEntry(
        tag="v0.16.0",
        source="pypi",
        patches=tuple(p.name for p in patches),
        bugs=tuple(sorted({p.purpose.bug for p in patches if p.purpose.bug})),
        level=level,
        carried_digest=digest_carried((p.name, p.text) for p in patches),
        pristine={"a.py": "0" * 64},
        patched={"a.py": "1" * 64},
    )


def test_dropping_a_published_patch_raises_the_level_and_never_lowers_it() -> None:
    """The issue's case: 0.16.0 carried 0001 and 0002 at +fm.2; 0002 is dropped. The default level was the number
    of patches carried, so it went back to +fm.1, below the published +fm.2; now it goes to +fm.3."""
    published = recorded(FIX, SHAPE).after(recorded(FIX, level=1))
    assert published.patch_level == 2  # 0002 added: one above
    dropped = recorded(FIX).after(published)
    assert dropped.patch_level == 3 and dropped.bugs == ("#1",)
    assert recorded(FIX).after(dropped) == dropped  # the same carried patches: the same level, "unchanged"
    changed = Patch(FIX.name, FIX.text.replace("Why: one.", "Why: one, reworded."))
    assert recorded(changed).after(dropped).patch_level == 4  # a changed patch is another release
    retired = FIX.with_trailer("Applied-Upstream", "v0.22.0")
    assert recorded(retired).after(dropped).patch_level == 4  # so is a retired one (its trailer is in the wheel)
    assert recorded(FIX).after(None).patch_level == 1  # a tag new to the train


def test_an_entry_recorded_before_levels_goes_up_from_the_number_it_shipped() -> None:
    """An entry without `level` and `carried_digest` shipped +fm.<number of patches>; other patches raise it."""
    legacy = replace(recorded(FIX, SHAPE), level=0, carried_digest="")
    assert legacy.patch_level == 2
    assert recorded(FIX).after(legacy).patch_level == 3
    assert recorded(FIX, SHAPE).after(legacy).patch_level == 2


def test_the_bugs_a_tag_has_only_grow() -> None:
    """A re-record whose replay no longer applies the fix keeps the bug: the gates then refuse the tag."""
    assert recorded(SHAPE).after(recorded(FIX, level=1)).bugs == ("#1",)


def test_a_removed_tag_added_again_goes_on_from_its_level(tmp_path: Path) -> None:
    """`train remove` then `train add`: the level published before is kept under [[removed]], so the tag comes
    back at that level (the same carried patches) or one above, never at 1; the file reads back byte-stably."""
    other = replace(recorded(FIX), tag="v0.17.0")
    train = Train((recorded(FIX, SHAPE).after(recorded(FIX, level=1)), other))
    gone = train.without("v0.16.0")
    assert gone.tags == ["v0.17.0"] and gone.previous("v0.16.0") is not None
    path = tmp_path / "train.toml"
    path.write_text(gone.dumps())
    assert "[[removed]]" in path.read_text() and Train.load(path, lines=("prepare_finalize",)) == gone
    again = gone.with_entry(recorded(FIX, SHAPE).after(gone.previous("v0.16.0")))
    assert again == train and again.dumps() == train.dumps()
    assert recorded(FIX).after(gone.previous("v0.16.0")).patch_level == 3
    path.write_text(gone.dumps().replace("level = 2", "level = 0"))
    with pytest.raises(TrainFileError, match="not a patch level"):
        Train.load(path, lines=("prepare_finalize",))


def test_the_level_follows_the_files_a_build_ships_and_a_rebuild_of_them_changes_nothing(tmp_path: Path) -> None:
    """`build` records what each tag's wheel ships (`shipped`): the first build of a level records it, the same
    files keep the level (the entry is unchanged, so nothing is written), other files raise it by one; a
    `--patch-level` is recorded too, never below the level, nor at it with other files. `train add` keeps the
    record while the level stays, and a level it raises has shipped nothing yet."""
    one, two, three = (f"sha256:{c * 64}" for c in "abc")
    added = recorded(FIX).after(None)
    first = added.shipped_at(one)
    assert (first.patch_level, first.shipped) == (1, one)
    assert first.shipped_at(one) == first  # a rebuild of the same files: nothing to write
    refreshed = first.shipped_at(two)  # e.g. a rebase refreshed the patch the wheel ships: other bytes
    assert (refreshed.patch_level, refreshed.shipped) == (2, two)
    assert recorded(FIX).after(refreshed) == refreshed  # train add with nothing new keeps level and record
    raised = recorded(FIX, SHAPE).after(refreshed)
    assert (raised.patch_level, raised.shipped) == (3, "")
    assert raised.shipped_at(three) == replace(raised, shipped=three)  # its first build keeps the raised level
    asked = refreshed.shipped_at(two, asked=5)
    assert (asked.patch_level, asked.shipped) == (5, two)
    for level, files in ((1, two), (2, three)):
        with pytest.raises(BadPatchLevelError, match="only goes up"):
            refreshed.shipped_at(files, asked=level)
    path = tmp_path / "train.toml"
    train = Train((refreshed,)).without(refreshed.tag).with_entry(asked)
    path.write_text(train.dumps())
    assert Train.load(path, lines=("prepare_finalize",)) == train and f'shipped = "{two}"' in path.read_text()
    path.write_text(train.dumps().replace(two, "sha256:0"))
    with pytest.raises(TrainFileError, match="`shipped`"):
        Train.load(path, lines=("prepare_finalize",))


def test_a_re_record_that_changes_nothing_writes_nothing(tmp_path: Path) -> None:
    """`train add` saves through `save`: the same train leaves the file untouched (the same inode: no rename)."""
    (tmp_path / "patches").mkdir()
    layout = Layout(tmp_path)
    train = Train((recorded(FIX).after(None),))
    save(layout, train)
    before = layout.train.stat()
    save(layout, train)
    assert layout.train.stat().st_ino == before.st_ino and layout.train.stat().st_mtime_ns == before.st_mtime_ns
    save(layout, train.with_entry(recorded(FIX, SHAPE).after(train.entries[0])))
    assert layout.train.stat().st_ino != before.st_ino and "level = 2" in layout.train.read_text()


def test_the_train_file_keeps_bugs_level_and_carries_byte_stably(tmp_path: Path) -> None:
    layout = Layout.default()
    text = layout.train.read_text()
    assert load_train(layout).dumps() == text
    for entry in load_train(layout).entries:
        assert entry.level >= 1 and entry.carried_digest.startswith("sha256:") and entry.bugs, entry.tag
    for bad in ("level = 0\n", 'level = "2"\n', 'carried_digest = "md5:00"\n', 'bugs = [""]\n'):
        spoiled = tmp_path / "patches" / "train.toml"
        spoiled.parent.mkdir(exist_ok=True)
        (spoiled.parent / "lines.toml").write_text(layout.lines.read_text())
        spoiled.write_text(re.sub(r"^level = \d+\n", bad, text, count=1, flags=re.M))  # whatever level it records
        assert spoiled.read_text() != text
        with pytest.raises(TrainFileError):
            load_train(Layout(tmp_path))


def test_the_shipped_train_records_what_each_tag_carries() -> None:
    """Each entry's `carried_digest` is the digest of the patches its line's series gives it now, so `build` takes the
    recorded level: a change to what a tag carries is re-recorded (`train add`), raising its level."""
    layout = Layout.default()
    lines = read_lines(layout.lines)
    for entry in load_train(layout).entries:
        carried = [p for p in tag_patches(layout, lines.get(entry.line), entry.tag) if p.name in entry.patches]
        refuse_unrecorded("build", entry, carried)  # raises for a tag the train does not record as it is


def test_build_refuses_a_tag_whose_carried_patches_the_train_does_not_record() -> None:
    entry = recorded(FIX, SHAPE).after(recorded(FIX, level=1))
    with pytest.raises(UnrecordedChangeError) as refused:
        refuse_unrecorded("not building v0.16.0", entry, [FIX])
    assert "patch level 2" in str(refused.value) and "train add v0.16.0" in (refused.value.hint or "")
    refuse_unrecorded("not building v0.16.0", entry, [FIX, SHAPE])


def test_build_help_says_where_the_default_level_comes_from() -> None:
    parser = argparse.ArgumentParser()
    build_cli.configure(parser)
    text = " ".join(parser.format_help().split())
    assert "the number of patches in the series" not in text
    assert "default: the level patches/train.toml records for the tag" in text


def test_publish_refuses_a_lower_level_with_other_files_and_pins_the_newest(tmp_path: Path) -> None:
    """+fm.2 is published; a build at +fm.1 with other files (the level that went back down) is refused, and the
    requirements file still pins +fm.2; +fm.3 is published and pinned. The index stage, which the command runs
    before its evidence (demo wheels are no builds of the checkout, which the command refuses)."""
    index = tmp_path / "index"
    requirements = index / "requirements" / "vllm-1.2.3.txt"
    publish([demo_wheel(tmp_path / "a", "1.2.3+fm.2")], index, project=PROJECT)
    before = snapshot(index)
    lower = demo_wheel(tmp_path / "b", "1.2.3+fm.1")
    with pytest.raises(PatchLevelNotAboveError) as refused:
        preflight([lower], index, project=PROJECT)
    assert str(refused.value).startswith(f"{lower.name} is at or below vllm_fused_moe-1.2.3+fm.2-py3-none-any.whl")
    assert snapshot(index) == before and "vllm-fused-moe==1.2.3+fm.2 " in requirements.read_text()
    publish([demo_wheel(tmp_path / "c", "1.2.3+fm.3")], index, project=PROJECT)
    assert "vllm-fused-moe==1.2.3+fm.3 " in requirements.read_text()
