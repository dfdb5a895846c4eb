"""Two branches that each add a patch, merged as docs/maintainers.md says (issue 44): real git, the real CLI.

A copy of the checkout (with its .gitattributes, as a clone has it) becomes a git repository whose train
holds one release of our own (vLLM's pinned pristine subtree under a version no index has, read from its
wheel file: no network), so `train add --all` replays one tag. Each branch adds a downstream patch on its
own file, skipped by every older line, and re-records the train; the merge conflicts in patches/train.toml
alone (patches/series and each line's series merge with git's `union` driver), and the documented block,
run command by command as written, ends with `check` at exit 0 and a train that carries both patches at
a level above both branches'.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import REPO, run_release
from helpers.doc_commands import commands_under, program
from helpers.synthetic import NEXT_TAG, add_patch, make_wheel, pristine
from helpers.train import load_train
from helpers.unsafe_sources import VERSION
from release.cli import main
from release.core.layout import Layout
from release.model.train import Train
from release.queue.load import Queue

HEADING = "### Merge two branches that each changed the queue"


def git(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """git as a maintainer runs it, with an empty configuration of its own (theirs is not ours to test)."""
    return subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )


def committed(root: Path, env: dict[str, str], *args: str) -> None:
    for argv in (("add", "patches", "vendor", ".gitattributes"), ("commit", "-q", *args)):
        done = git(root, env, *argv)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)


def test_two_branches_that_each_add_a_patch_merge_as_the_docs_say(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gitconfig").write_text("")
    env = {
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        **{f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "A Maintainer"), ("EMAIL", "maintainer@example.com"))},
        "VLLM_FUSED_MOE_CACHE": str(tmp_path / "cache"),
    }  # fmt: skip
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", env["VLLM_FUSED_MOE_CACHE"])  # the set-up's commands run in process
    shutil.copy(REPO / ".gitattributes", project / ".gitattributes")
    layout = Layout(project)
    wheel = make_wheel(tmp_path / f"vllm-{VERSION}-cp38-abi3-linux_x86_64.whl", pristine(project), VERSION)
    layout.train.write_text(Train(()).dumps())
    assert main(["--root", str(project), "train", "add", NEXT_TAG, "--from", f"wheel:{wheel}"]) == 0
    assert git(project, env, "init", "-q", "-b", "main").returncode == 0
    committed(project, env, "-m", "the queue")
    # Two files no patch of the queue changes, one for each branch's patch.
    touched = {path.rsplit("/", 1)[-1] for patch in Queue.load(layout).patches for path in patch.files}
    first, second = sorted(name for name in pristine(project) if name.endswith(".py") and name not in touched)[:2]
    vendor = project / "vendor" / "vllm_fused_moe" / "prepare_finalize"
    names = {}
    for branch, file in (("one", first), ("two", second)):
        assert git(project, env, "switch", "-q", "-c", branch, "main").returncode == 0
        top = (vendor / file).read_text().splitlines(keepends=True)[0]
        names[branch] = add_patch(project, f"0002-note-{branch}.patch", file, top, top + f"# {branch}\n", branch)
        assert main(["--root", str(project), "train", "add", "--all"]) == 0
        committed(project, env, "-m", f"patches: add {names[branch]}")
    levels = {b: load_train(layout).entries[0].level for b in names}
    assert git(project, env, "switch", "-q", "one").returncode == 0

    for command in commands_under(REPO, REPO / "docs" / "maintainers.md", HEADING):
        words = [word.replace("OTHER", "two") for word in command.words]
        ran = program(words)
        if ran.kind == "release":
            done = run_release(project, *ran.args, env=env)
        else:
            assert words[0] == "git", f"a documented step this test cannot run: {command.where}"
            done = git(project, env, *words[1:])
        said = (command.where, done.stdout, done.stderr)
        if words[:2] == ["git", "merge"]:  # the one conflict the section is about
            assert done.returncode == 1 and "Merge conflict in patches/train.toml" in done.stdout, said
            unmerged = git(project, env, "diff", "--name-only", "--diff-filter=U").stdout.split()
            assert unmerged == ["patches/train.toml"], said
        else:
            assert done.returncode == 0, said

    [entry] = load_train(layout).entries
    series = Queue.load(layout).series.names
    assert series[-2:] == [names["one"], names["two"]] and list(entry.patches) == series, entry
    assert entry.level > max(levels.values()), (entry.level, levels)
    assert git(project, env, "rev-list", "--parents", "-n", "1", "HEAD").stdout.count(" ") == 2  # a merge commit
    assert git(project, env, "status", "--porcelain", "patches", "vendor").stdout == ""
