"""Which vLLM tag the watch rebases onto: parsing `git ls-remote --tags` and choosing the newest
final release after the pin (the `tags` command against a real git remote: tests/cli/test_tags.py)."""

from __future__ import annotations

from helpers.ls_remote import LS_REMOTE
from release.core.versions import Version, parse_version
from release.rebase.tags import newer_than, parse_ls_remote, releases


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
