"""Which vLLM release tags are newer than our pin (`python -m release tags`: tags_cli.py).

The scheduled watch workflow asks this module for the newest release to rebase onto.
Parsing and choosing are pure functions over the text `git ls-remote --tags` prints, so
they are tested on recorded output; only `ls_remote` touches the network.

What counts as a release: `vX.Y.Z` and `vX.Y.Z.postN` (what `release rebase` accepts).
Not releases: pre-releases (`rc`, `a`, `b`, `dev`), anything else that is not a version.
A wheel build tag (`0.21.0-1`, as in PyPI's `vllm-0.21.0-1-cp38-abi3-…whl`) is a rebuild of
release 0.21.0, never a release of its own: it maps to 0.21.0 and is merged with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from release.core.errors import BadTagError, GitError, RemoteError
from release.core.git import ls_remote_tags
from release.core.versions import Version, parse_version
from release.pristine import transport


@dataclass(frozen=True)
class RemoteTag:
    """One tag as a remote lists it."""

    name: str  # as on the remote, e.g. "v0.21.0" or "0.21.0-1"
    commit: str  # the peeled commit where ls-remote gave one, else the tag object
    version: Version | None  # None: not a version tag at all
    build: int | None = None  # the wheel build number of a `X.Y.Z-N` tag


def parse_ls_remote(text: str) -> list[RemoteTag]:
    """The tags in `git ls-remote --tags` output, one per name, annotated tags peeled.

    An annotated tag is listed twice: `SHA refs/tags/v0.21.0` (the tag object) and
    `SHA refs/tags/v0.21.0^{}` (the commit it points to); the commit wins.
    """
    commits: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        sha, sep, ref = line.partition("\t")
        if not sep or not ref.startswith("refs/tags/"):
            continue
        name = ref.removeprefix("refs/tags/")
        peeled = name.endswith("^{}")
        name = name.removesuffix("^{}")
        if peeled or name not in commits:
            commits[name] = sha.strip()
    tags = []
    for name, commit in commits.items():
        parsed = parse_version(name)
        version, build = parsed if parsed else (None, None)
        tags.append(RemoteTag(name, commit, version, build))
    return tags


def releases(tags: list[RemoteTag]) -> dict[Version, RemoteTag]:
    """Final releases, one entry per version; a plain tag is preferred to a build tag of it."""
    chosen: dict[Version, RemoteTag] = {}
    for tag in tags:
        if tag.version is None or not tag.version.is_final:
            continue
        held = chosen.get(tag.version)
        if held is None or (held.build is not None and tag.build is None):
            chosen[tag.version] = tag
    return chosen


def newer_than(pin_tag: str, tags: list[RemoteTag]) -> list[Version]:
    """Final releases strictly newer than the pin, oldest first.

    A build tag of the pinned version (`0.20.0-1` against `v0.20.0`) is the release we
    already have, so it is not newer; neither is anything at or below the pin.
    """
    parsed = parse_version(pin_tag)
    if parsed is None or not parsed[0].is_final:
        raise BadTagError(f"the pin {pin_tag!r} is not a vLLM release tag")
    pin = parsed[0]
    return sorted((v for v in releases(tags) if v.key > pin.key), key=lambda v: v.key)


def ls_remote(url: str) -> str:
    """The raw `git ls-remote --tags URL` text; a failure is a RemoteError (exit 4) naming git's message.

    Bounded by the same deadline as every network read (VLLM_FUSED_MOE_HTTP_DEADLINE): a remote that
    accepts the connection and then says nothing must not hang the scheduled watch.
    """
    try:
        return ls_remote_tags(url, timeout=transport.settings().deadline)
    except GitError as exc:
        raise RemoteError(str(exc)) from None
