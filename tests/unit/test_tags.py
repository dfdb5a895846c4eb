"""Which vLLM tag the watch rebases onto: parsing `git ls-remote --tags`, choosing the newest
final release after the pin, and the `tags` command against a real local git remote."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import run_release
from release.core.versions import Version, parse_version
from release.model.pin import Pin
from release.rebase.tags import newer_than, parse_ls_remote, releases

# Recorded in the real format: "<sha>\trefs/tags/<name>", annotated tags followed by their
# peeled "^{}" line. Includes what must not be chosen: rc and dev pre-releases, a wheel
# build tag of a release we have (0.20.0-1) and of the newest (0.22.0-1), non-version tags.
LS_REMOTE = """\
1111111111111111111111111111111111111111\trefs/tags/v0.19.1
2222222222222222222222222222222222222222\trefs/tags/v0.20.0
a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2\trefs/tags/v0.20.0^{}
2020202020202020202020202020202020202020\trefs/tags/0.20.0-1
3333333333333333333333333333333333333333\trefs/tags/v0.20.1rc1
4444444444444444444444444444444444444444\trefs/tags/v0.20.1
5555555555555555555555555555555555555555\trefs/tags/v0.20.1.post1
b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5\trefs/tags/v0.20.1.post1^{}
6666666666666666666666666666666666666666\trefs/tags/v0.21.0rc1
7777777777777777777777777777777777777777\trefs/tags/v0.21.0rc2
8888888888888888888888888888888888888888\trefs/tags/v0.21.0
c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8\trefs/tags/v0.21.0^{}
9999999999999999999999999999999999999999\trefs/tags/0.22.0-1
aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\trefs/tags/v0.23.0rc1
bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\trefs/tags/v0.23.0.dev0
cccccccccccccccccccccccccccccccccccccccc\trefs/tags/nightly
dddddddddddddddddddddddddddddddddddddddd\trefs/tags/v0.10.1.1
"""


def tags_of(versions: list[Version]) -> list[str]:
    return [v.tag for v in versions]


def test_parse_version_kinds() -> None:
    assert parse_version("v0.21.0") == (Version((0, 21, 0)), None)
    assert parse_version("0.21.0-1") == (Version((0, 21, 0)), 1)
    assert parse_version("v0.20.1.post1") == (Version((0, 20, 1), post=1), None)
    assert parse_version("v0.21.0rc2") == (Version((0, 21, 0), pre="rc2"), None)
    assert parse_version("v0.23.0.dev0") == (Version((0, 23, 0), pre="dev0"), None)
    for not_a_version in ("nightly", "v0.21", "v0.10.1.1", "v0.21.0-rc1x", "refs/tags/v0.21.0"):
        assert parse_version(not_a_version) is None, not_a_version


def test_peeled_commit_wins_and_each_tag_is_listed_once() -> None:
    tags = {t.name: t for t in parse_ls_remote(LS_REMOTE)}
    assert tags["v0.21.0"].commit == "c8" * 20
    assert tags["v0.19.1"].commit == "1" * 40  # lightweight: no peeled line
    assert len(tags) == len({line.split("\t")[1].removesuffix("^{}") for line in LS_REMOTE.splitlines()})


def test_newest_final_release_after_the_pin() -> None:
    tags = parse_ls_remote(LS_REMOTE)
    assert tags_of(newer_than("v0.20.0", tags)) == ["v0.20.1", "v0.20.1.post1", "v0.21.0", "v0.22.0"]


def test_wheel_build_tag_is_the_release_not_a_new_one() -> None:
    tags = parse_ls_remote(LS_REMOTE)
    # 0.22.0 exists only as the build tag 0.22.0-1; it is release 0.22.0, named the way rebase takes it.
    assert releases(tags)[Version((0, 22, 0))].name == "0.22.0-1"
    assert tags_of(newer_than("v0.21.0", tags)) == ["v0.22.0"]
    # 0.20.0-1 is the release we are pinned to: nothing newer when only it is on top.
    only_rebuild = parse_ls_remote(
        "2020202020202020202020202020202020202020\trefs/tags/0.20.0-1\n"
        "2222222222222222222222222222222222222222\trefs/tags/v0.20.0\n"
    )
    assert newer_than("v0.20.0", only_rebuild) == []
    # A plain tag is preferred to a build tag of the same version.
    both = parse_ls_remote("1\trefs/tags/0.21.0-1\n2\trefs/tags/v0.21.0\n")
    assert releases(both)[Version((0, 21, 0))].name == "v0.21.0"


def test_pre_releases_and_tags_we_have_are_never_chosen() -> None:
    tags = parse_ls_remote(LS_REMOTE)
    assert newer_than("v0.22.0", tags) == []  # v0.23.0rc1 and v0.23.0.dev0 are not releases
    assert newer_than("v0.21.0", tags) == [Version((0, 22, 0))]
    assert tags_of(newer_than("v0.20.1", tags)) == ["v0.20.1.post1", "v0.21.0", "v0.22.0"]  # .postN is newer
    assert newer_than("v0.20.1.post1", parse_ls_remote("1\trefs/tags/v0.20.1\n")) == []


# ------------------------------------------------------------ a real remote


def git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    repo = tmp_path / "vllm-remote"
    repo.mkdir()
    git(repo, "init", "--quiet")
    for number, tag in enumerate(["v0.20.0", "0.20.0-1", "v0.21.0rc1", "v0.21.0", "0.21.0-1", "v0.22.0rc1"]):
        git(repo, "commit", "--quiet", "--allow-empty", "-m", f"commit {number}")
        if number % 2:
            git(repo, "tag", tag)  # lightweight
        else:
            git(repo, "tag", "-a", tag, "-m", tag)  # annotated: ls-remote adds a peeled ^{} line
    return repo


def test_tags_command_lists_newer_releases_from_a_real_remote(project: Path, remote: Path) -> None:
    # Without --pin the command compares with UPSTREAM.toml: pin the copy at the remote's first release.
    pin_file = project / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml"
    pin_file.write_text(replace(Pin.load(pin_file), tag="v0.20.0").dumps())
    result = run_release(project, "tags", "--remote", str(remote))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["v0.21.0"]
    newest = run_release(project, "tags", "--remote", str(remote), "--newest", "--pin", "v0.19.0")
    assert newest.returncode == 0 and newest.stdout == "v0.21.0\n"
    none = run_release(project, "tags", "--remote", str(remote), "--newest", "--pin", "v0.21.0")
    assert none.returncode == 0 and none.stdout == ""


def test_tags_command_bad_input_and_unreachable_remote(project: Path, tmp_path: Path) -> None:
    recorded = tmp_path / "ls-remote.txt"
    recorded.write_text(LS_REMOTE)
    assert run_release(project, "tags", "--ls-remote-output", str(recorded), "--newest").stdout == "v0.22.0\n"
    bad_pin = run_release(project, "tags", "--ls-remote-output", str(recorded), "--pin", "v0.21.0rc1")
    assert bad_pin.returncode == 2 and "error: the pin 'v0.21.0rc1' is not a vLLM release tag" in bad_pin.stderr
    missing = run_release(project, "tags", "--remote", str(tmp_path / "no-such-repo"))
    # A remote that cannot be listed is the transport's failure: exit 4, as from every command that reads one.
    assert missing.returncode == 4 and missing.stderr.startswith("error: `git ls-remote --tags")
    assert missing.stdout == ""
