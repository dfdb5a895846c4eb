"""vLLM release tags and versions: the one module that reads them, for every command.

Two grammars, each read here only: a release *tag* (`vX.Y.Z[.postN]`, with the pre-release and build
suffixes `rebase` orders: VERSION_TAG_RE) and a *package version* as pip reads it from an index, a wheel's
file name or its METADATA (PEP 440, through `packaging`: `package_version`). No other module parses a
version itself (docs/architecture.md, "Who owns what").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging import version as _pep440

from release.core.errors import BadTagError, UnknownTagError

# packaging's PEP 440 types, named from here: callers never import packaging.version themselves.
Pep440Version = _pep440.Version
InvalidVersion = _pep440.InvalidVersion

# Longer than any release tag (v0.10.1.post12rc3 is 17): longer text is refused before a regular
# expression or int() reads it (Python refuses int() of more than 4300 digits with a ValueError).
MAX_TAG_LENGTH = 40
# One anchored grammar for everything that looks like a version tag; groups say which kind. A release tag
# (canonical_tag) is a match without `pre` or `build`.
# re.ASCII: `\d` is [0-9] only. Without it `\d` takes any Unicode digit (`v٠.11.1`), which int() reads
# too, while packaging's Version and git do not: a tag is ASCII throughout.
VERSION_TAG_RE = re.compile(
    r"""^v?(?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)
        (?:\.post(?P<post>\d+))?
        (?P<pre>(?:rc|a|b|alpha|beta|\.?dev)\d*)?
        (?:-(?P<build>\d+))?$""",
    re.VERBOSE | re.ASCII,
)


def canonical_tag(text: str) -> str:
    """The one spelling of a release tag that every command writes: 'vX.Y.Z[.postN]'.

    What a person types is taken as meant: surrounding whitespace is dropped and a bare
    version gets its `v` (' 0.21.0' -> 'v0.21.0'). Anything else is bad input, one line.
    Files the tool writes (UPSTREAM.toml, train.toml) must already hold this spelling.
    """
    match = VERSION_TAG_RE.match(text.strip()) if len(text) <= MAX_TAG_LENGTH else None
    if not match or match.group("pre") is not None or match.group("build") is not None:
        raise UnknownTagError(tag=shown(text))
    return "v" + match.group(0).removeprefix("v")  # the digits as written: a tag names what git has


def shown(text: str) -> str:
    """`text` quoted for a message, cut short where it is longer than any tag (bad input may be huge)."""
    return repr(text) if len(text) <= MAX_TAG_LENGTH else f"{text[:MAX_TAG_LENGTH]!r}... ({len(text)} characters)"


def release_version(text: str) -> Pep440Version:
    """A final release as PEP 440 reads it ('v0.17.0', '0.10.1.1'): what `scan --since/--until` take."""
    try:
        if len(text) > MAX_TAG_LENGTH:
            raise InvalidVersion(text)
        version = package_version(text.strip().removeprefix("v"))
    except InvalidVersion:
        raise BadTagError(f"{shown(text)} is not a vLLM release (expected e.g. v0.17.0 or 0.10.1.1)") from None
    if version.is_prerelease or version.is_devrelease:
        raise BadTagError(f"{shown(text)} is a pre-release; scan covers final releases only")
    return version


def package_version(text: str) -> Pep440Version:
    """A version as pip reads it (PEP 440: an index's, a wheel file name's, a METADATA `Version:`), ordered
    and compared as pip does; InvalidVersion (re-exported here) where `text` is not one."""
    return Pep440Version(text)


def version_of_tag(tag: str) -> str:
    """'v0.20.0' (or '0.20.0') -> '0.20.0'; anything that is not a plain release tag is bad input."""
    return canonical_tag(tag)[1:]


@dataclass(frozen=True)
class Version:
    """A vLLM version as far as release ordering needs: X.Y.Z[.postN], pre-release or not."""

    release: tuple[int, int, int]
    post: int | None = None
    pre: str | None = None

    @property
    def is_final(self) -> bool:
        return self.pre is None

    @property
    def key(self) -> tuple[int, int, int, int]:
        # X.Y.Z < X.Y.Z.post1 < X.Y.(Z+1); pre-releases never reach a comparison that matters.
        return (*self.release, -1 if self.post is None else self.post)

    @property
    def tag(self) -> str:
        """The canonical tag name, the one `release rebase` takes."""
        text = "v" + ".".join(str(part) for part in self.release)
        if self.post is not None:
            text += f".post{self.post}"
        return text + (self.pre or "")

    def __str__(self) -> str:
        return self.tag.removeprefix("v")


def parse_version(text: str) -> tuple[Version, int | None] | None:
    """'v0.21.0' -> (0.21.0, None); '0.21.0-1' -> (0.21.0, 1); 'nightly' -> None."""
    match = VERSION_TAG_RE.match(text.strip()) if len(text) <= MAX_TAG_LENGTH else None
    if not match:
        return None
    pre = match.group("pre")
    version = Version(
        (int(match.group("major")), int(match.group("minor")), int(match.group("patch"))),
        int(match.group("post")) if match.group("post") is not None else None,
        pre.lstrip(".") if pre else None,
    )
    build = match.group("build")
    return version, int(build) if build is not None else None
