"""A tag's patch level follows the bytes its wheel ships, through every documented flow, onto one published index.

One copy of the checkout (its train cut to the head and the newest tag of an older release line that carries
a bug, real release wheels, cached) and one index that already holds the train's wheels (not a fresh one), walked in
order, as a maintainer would: add two patches (three in all, two on 0001's file), each older line
`pq skip`ping them; edit one; `pq import --line` then `pq export --dir` with no change; `pq drop`; the
README's rebase onto the next release (it refreshes the patches the older head's wheel ships); the hint's
`--patch-level`; a rebase that retires 0001 at the head while the older tags keep it. After each:
`train add --all` where the docs say so, then `build` (`--all`, or the tags the step changes), whose wheels
are named by the level patches/train.toml records, which went up exactly for the tags whose wheels changed.
`publish` exits 0 and each requirements file pins that level where the step changes what the index must
prove: the previous train; the rebase (the new release's first proof, and the head's level that the add,
edit and drop made); the other checkout's level and the hint's; the last `build --all` (the other tag's
level; a rebuild of the same files writes nothing); one head-line tag after the retirement, beside the other
tag's wheel, which publish leaves as it is. The add, edit and drop change no bug a wheel fixes: publishing
each would run the same proofs again on new bytes (a torch and vLLM import each). Every command runs under
a HOME whose
~/.gitconfig sets diff.noprefix and format.signOff. No release is named here: the tags come from the pin,
the train and tests/releases.toml.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from helpers import copy_project, run_release, snapshot, tag_facts
from helpers.synthetic import SHAPE_CHECK_PATCH, add_patch, add_shape_check
from helpers.train import load_train
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.model.lines import read_lines
from release.model.pin import Pin
from release.model.train import Train
from release.pristine.wheel import cache_dir
from release.queue.load import is_head

pytestmark = pytest.mark.network  # the release wheels come from the package index once, then the cache

STACKED = "0003-one-sided-stacked.patch"


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """The project (its train: the head and the newest tag of the oldest line), the index, the hostile env."""
    root = tmp_path_factory.mktemp("levels")
    project = copy_project(root)
    layout = Layout(project)
    if Pin.load(layout.upstream_toml).tag == tag_facts.rebase_to():  # the README's rebase ran: start before it
        moved = run_release(project, "rebase", tag_facts.rebase_from(), "--from", "pypi", "--allow-older")
        assert moved.returncode == 0, moved.stdout + moved.stderr
    train = load_train(layout)
    other = tag_facts.older_line_tag(train)  # test_evidence.py's too: the pristine release's proof is made once
    head = train.get(Pin.load(layout.upstream_toml).tag)
    assert head is not None and other.line != head.line
    layout.train.write_text(Train((other, head)).dumps())
    home = root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[diff]\n\tnoprefix = true\n[format]\n\tsignOff = true\n")
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "VLLM_FUSED_MOE_CACHE": str(cache_dir().parent)}
    return project, root / "index", env


def build(project: Path, env: dict[str, str], name: str, tags: list[str] | None = None) -> tuple[Path, dict[str, int]]:
    """`build --all` (or `--tag` each of `tags`) exits 0 and names each wheel by the level patches/train.toml
    records; returns the dist directory and the levels it records."""
    dist = project.parent / f"dist-{name}"
    which = ["--all"] if tags is None else [arg for tag in tags for arg in ("--tag", tag)]
    built = run_release(project, "build", *which, "--out", str(dist), env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    levels = {e.tag: e.patch_level for e in load_train(Layout(project)).entries}
    versions = sorted(wheel.name.split("-")[1] for wheel in dist.glob("vllm_fused_moe-*.whl"))
    assert versions == sorted(f"{version_of_tag(tag)}+fm.{levels[tag]}" for tag in tags or levels), versions
    return dist, levels


def ship(
    project: Path, index: Path, env: dict[str, str], name: str, tags: list[str] | None = None, added: str = ""
) -> dict[str, int]:
    """`build` then `publish` of its wheels onto the index: exits 0, and each built tag's requirements file pins
    the level patches/train.toml records; returns the levels it records. `added`: the one tag whose wheel publish
    adds, the others' being in the index already (the same bytes)."""
    dist, levels = build(project, env, name, tags)
    published = run_release(project, "publish", str(dist), str(index), env=env)
    assert published.returncode == 0, published.stdout + published.stderr
    for tag in tags or levels:
        version = f"{version_of_tag(tag)}+fm.{levels[tag]}"
        pinned = (index / "requirements" / f"vllm-{version_of_tag(tag)}.txt").read_text()
        assert re.search(rf"(?m)^vllm-fused-moe=={re.escape(version)} ", pinned), (tag, pinned)
        if added:
            [wheel] = dist.glob(f"vllm_fused_moe-{version}-*.whl")
            said = "published" if tag == added else "already published (same bytes)"
            assert f"{said} {wheel.name}" in published.stdout.splitlines(), published.stdout
    return levels


def run_ok(project: Path, env: dict[str, str], *args: str) -> str:
    done = run_release(project, *args, env=env)
    assert done.returncode == 0, (args, done.stdout + done.stderr)
    return done.stdout


def test_every_flow_publishes_a_new_level_exactly_for_the_wheels_it_changes(
    walk: tuple[Path, Path, dict[str, str]],
) -> None:
    project, index, env = walk
    layout = Layout(project)
    head_line = next(line for line in read_lines(layout.lines).lines if is_head(layout, line))
    others = [line.name for line in read_lines(layout.lines).lines if line.name != head_line.name]
    head, other = Pin.load(layout.upstream_toml).tag, load_train(layout).entries[0].tag

    # The previous train, published (a rebuild of the same files writes nothing: the last step).
    before = ship(project, index, env, "previous")
    assert b"shipped = " in layout.train.read_bytes()

    # Add: 0002 (the shape check) and 0003 (a second patch on 0001's file), each older line skipping them.
    add_shape_check(project)
    one_sided = "flashinfer_nvlink_one_sided.py"
    add_patch(project, STACKED, one_sided, "return torch.int32\n", "return torch.int32  # stacked\n", "stacked", False)
    for name in (SHAPE_CHECK_PATCH, STACKED):
        for line in others:
            run_ok(project, env, "pq", "skip", name, "--line", line, "--reason", "not on this line's classes")
    run_ok(project, env, "train", "add", "--all")
    _, added = build(project, env, "add")
    # The head carries two more patches; the other tag carries the same, but its line's series gained `skip`s.
    assert added == {head: before[head] + 1, other: before[other] + 1}

    # Edit: 0002's message reworded (what `git commit --amend` then `pq export` leave): the head only.
    patch = project / "patches" / SHAPE_CHECK_PATCH
    patch.write_text(patch.read_text().replace("Why: a test needs a patch here.", "Why: a test needs it here."))
    run_ok(project, env, "train", "add", "--all")
    _, edited = build(project, env, "edit")
    assert edited == {head: added[head] + 1, other: added[other]}

    # The other line's variant through the tool with no change: nothing written, nothing to ship.
    unchanged = snapshot(project)
    work = project.parent / "pq-line"
    line = load_train(layout).entries[0].line
    run_ok(project, env, "pq", "import", "--line", line, "--dir", str(work))
    run_ok(project, env, "pq", "export", "--dir", str(work))
    assert snapshot(project) == unchanged

    # Drop 0002: the head's wheel loses it, the other line's series its `skip`.
    run_ok(project, env, "pq", "drop", SHAPE_CHECK_PATCH)
    run_ok(project, env, "train", "add", "--all")
    _, dropped = build(project, env, "drop")
    assert dropped == {head: edited[head] + 1, other: edited[other] + 1}

    # The README's rebase onto the next release: it refreshes 0001 and 0003, which the old head's wheel ships.
    # The head line's wheels are built and published: the new release's first proof, and the head's level that the
    # add, edit and drop made. The other tag's wheel, which the rebase leaves as the drop built it, is published by
    # the last build --all below, after the other checkout's level of it.
    target = tag_facts.rebase_to()
    run_ok(project, env, "rebase", target, "--from", "pypi", "--report", str(project.parent / "report"))
    rebased = ship(project, index, env, "rebase", [head, target])
    assert rebased == {other: dropped[other], head: dropped[head] + 1, target: 1}

    # Another checkout published a level of the other tag this one never recorded; this one's own change at the
    # next level is refused, and the hint's way out, a --patch-level above the index's newest, is recorded.
    elsewhere = project.parent / "elsewhere"
    shutil.copytree(project, elsewhere, ignore=shutil.ignore_patterns(".work"))
    for checkout, said in ((elsewhere, "elsewhere"), (project, "here")):
        series = checkout / "patches" / "lines" / line / "series"
        series.write_text(series.read_text() + f"# a note written {said}\n")
    run_ok(elsewhere, env, "build", "--tag", other, "--out", str(elsewhere / "dist"))
    run_ok(elsewhere, env, "publish", str(elsewhere / "dist"), str(index))
    dist = project.parent / "dist-clash"
    run_ok(project, env, "build", "--all", "--out", str(dist))
    clash = run_release(project, "publish", str(dist), str(index), env=env)
    assert clash.returncode == 2 and "--patch-level N" in clash.stderr, clash.stderr
    below = run_release(project, "build", "--tag", other, "--patch-level", "1", "--out", str(project.parent / "x"))
    assert below.returncode == 2 and "only goes up" in below.stderr, below.stderr
    asked = rebased[other] + 2
    dist = project.parent / "dist-asked"
    run_ok(project, env, "build", "--tag", other, "--patch-level", str(asked), "--out", str(dist))
    run_ok(project, env, "publish", str(dist), str(index))
    recorded = layout.train.read_bytes()
    assert ship(project, index, env, "after-asked") == {**rebased, other: asked}
    assert layout.train.read_bytes() == recorded

    # Retire: a rebase onto the first release with 0001's change; the older head-line tags keep replaying it,
    # now with its Applied-Upstream: trailer (re-recorded as the docs say), the new head carries 0003 alone.
    fixed = tag_facts.first_fixed()
    run_ok(project, env, "rebase", fixed, "--from", "pypi", "--report", str(project.parent / "report-retire"))
    run_ok(project, env, "train", "add", "--all")
    # (Its own wheel waits for a FlashInfer pin VERIFIED.toml holds: issue 36's part 2; the rest are built.)
    # One head-line tag older than `fixed` is published: it replays 0001 from patches/retired/, as the other does;
    # publish adds its new level and leaves the other tag's, which the retirement did not change.
    assert sorted(load_train(layout).tags) == sorted([other, head, target, fixed])
    build(project, env, "retire-head", [head])
    retired = ship(project, index, env, "retire", [other, target], added=target)
    assert retired == {other: asked, head: rebased[head] + 1, target: rebased[target] + 1, fixed: 1}
    assert getattr(load_train(layout).get(fixed), "patches", None) == (STACKED,)
