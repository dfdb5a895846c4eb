"""A later patch on a file an earlier patch changes merges 3-way on every tag, as git would (never fuzz).

The replay on a tag is a git history (release/queue/replay.py, `start`): the tree the series was
made on goes in first with the series applied there, so the blob a stacked patch's `index` line
names (the file as the patches before it left it on that tree) is in the object store. Here, with
real git on small synthetic trees: a "head" tree the patches are made on, and tags whose file
differs from it inside the later patches' context (so a plain `git apply` fails and only a 3-way
merge can take them), replayed by `train`'s replay, `scan`'s classifier and `rebase`'s start; under
the caller's HOME and under one whose ~/.gitconfig sets diff.noprefix and format.signOff.
The same on the real train, through the CLI: tests/e2e/test_stacked_patches.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.synthetic import patch_message
from release.core.git import WorkRepo
from release.model.outcome import PatchStatus
from release.model.patch import Patch
from release.model.tree import UpstreamTree
from release.queue.replay import Replay, replay_series
from release.scan.run import classify_patches
from release.train.replay import replay_tag

ONE, OTHER = "one_sided.py", "two_sided.py"


def module(changes: dict[int, str] | None = None, lines: int = 40) -> bytes:
    """A module of `lines` assignments, with the given lines replaced."""
    text = {i: f"x{i} = {i}\n" for i in range(lines)} | {i: f"{t}\n" for i, t in (changes or {}).items()}
    return "".join(text[i] for i in range(lines)).encode()


HEAD = {ONE: module(), OTHER: module()}
# Each tag differs from the head two lines from where the stacked patches change `ONE` (inside their
# context, so they only merge 3-way), and a tag may differ in the other file too.
TAGS = {
    "v1.0.0": {ONE: module({12: "x12 = 'v1.0.0'", 22: "x22 = 'v1.0.0'"}), OTHER: module()},
    "v1.1.0": {ONE: module({12: "x12 = 'v1.1.0'", 22: "x22 = 'v1.1.0'"}), OTHER: module({32: "x32 = 'v1.1.0'"})},
}


def series(tmp_path: Path, stacked: int) -> list[Patch]:
    """0001 on ONE, then `stacked` - 1 more patches on ONE, then one on OTHER; each made on the head as the
    ones before it left it, and exported as `pq export` does."""
    repo = WorkRepo.create(tmp_path / "make")
    base = repo.commit_subtree(HEAD, "head pristine")
    edits = [*[(ONE, 5), (ONE, 14), (ONE, 24)][:stacked], (OTHER, 30)]
    for number, (name, line) in enumerate(edits, 1):
        path = repo.subtree / name
        text = path.read_text().replace(f"x{line} = {line}\n", f"x{line} = 'patch {number}'\n")
        path.write_text(text)
        repo.run("add", "--all")
        repo.run("commit", "--quiet", "-m", patch_message(f"test: patch {number}"), fixed_date=True)
    mails = repo.export(base, tmp_path / "mails")
    return [Patch(f"{n:04d}-patch.patch", mail.read_text()) for n, mail in enumerate(mails, 1)]


def expected(tag_files: dict[str, bytes], stacked: int) -> dict[str, bytes]:
    """The tag's files with every patch's line changed, its own differences kept."""
    edits = [(ONE, line) for line in [5, 14, 24][:stacked]] + [(OTHER, 30)]
    out = {name: data.decode() for name, data in tag_files.items()}
    for number, (name, line) in enumerate(edits, 1):
        out[name] = out[name].replace(f"x{line} = {line}\n", f"x{line} = 'patch {number}'\n")
    return {name: text.encode() for name, text in out.items()}


@pytest.fixture(params=["home", "hostile-home"])
def home(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's HOME, or one whose ~/.gitconfig makes every diff and mail git writes differ."""
    if request.param == "hostile-home":
        hostile = tmp_path / "hostile"
        hostile.mkdir()
        (hostile / ".gitconfig").write_text(
            "[diff]\n\tnoprefix = true\n\tcontext = 5\n[format]\n\tsignOff = true\n[am]\n\tthreeWay = false\n"
        )
        monkeypatch.setenv("HOME", str(hostile))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(hostile / ".config"))


@pytest.mark.usefixtures("home")
@pytest.mark.parametrize("stacked", [2, 3], ids=["two-on-one-file", "three-on-one-file"])
def test_train_replay_merges_stacked_patches_3way_on_every_tag(tmp_path: Path, stacked: int) -> None:
    patches = series(tmp_path, stacked)
    assert len(patches) == stacked + 1
    for tag, files in {"v2.0.0": HEAD, **TAGS}.items():
        done = replay_tag(UpstreamTree(tag, "test", files), HEAD, patches)
        assert done.conflict is None, (tag, [(o.name, o.status, o.how) for o in done.outcomes])
        assert list(done.applied) == [p.name for p in patches], tag
        assert done.files == expected(files, stacked), tag
        if tag != "v2.0.0":  # the stacked ones only merge 3-way there: no plain apply, and never fuzz
            assert [o.how for o in done.outcomes][1:stacked] == ["3-way merge"] * (stacked - 1), tag


@pytest.mark.parametrize("stacked", [2, 3], ids=["two-on-one-file", "three-on-one-file"])
def test_scan_classifies_stacked_patches_as_applying_on_every_tag(tmp_path: Path, stacked: int) -> None:
    patches = series(tmp_path, stacked)
    for tag, files in TAGS.items():
        states = classify_patches(patches, files, HEAD, tmp_path / tag)
        assert set(states.values()) == {PatchStatus.APPLIES}, (tag, states)


def test_a_replay_without_the_tree_the_series_was_made_on_is_a_conflict(tmp_path: Path) -> None:
    """What the blobs are for: without them git has no base for the second patch, so it conflicts
    (no fuzz fills in)."""
    patches = series(tmp_path, 2)
    repo = WorkRepo.create(tmp_path / "bare")
    repo.commit_subtree(HEAD, "head pristine, without the series on it")
    repo.commit_subtree(TAGS["v1.0.0"], "v1.0.0 pristine")
    stopped = replay_series(repo, tmp_path, patches, Replay(), UpstreamTree("v1.0.0", "test", TAGS["v1.0.0"]))
    assert stopped is not None and stopped.name == patches[1].name
