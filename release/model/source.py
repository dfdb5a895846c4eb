"""`--from SOURCE`: where one tag's pristine code is read from, parsed once where it enters.

The text is parsed at the edge (the command line, a train entry, a stopped rebase's state) into
a `Source` of one `SourceKind`; the readers in release/pristine/ dispatch on the kind, and
`str(source)` gives the text back as it was written (what reports and files hold).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import PurePath

from release.core.errors import SourceError

DEFAULT_GIT_URL = "https://github.com/vllm-project/vllm.git"
DEFAULT_SOURCE = f"git+{DEFAULT_GIT_URL}"
# The URL schemes git+URL takes (git fetches from the URL after "git+").
GIT_URL_SCHEMES = ("http", "https", "file", "ssh")


class SourceKind(StrEnum):
    PYPI = "pypi"  # the tag's release wheel on the package index
    WHEEL = "wheel"  # wheel:PATH, a release wheel file
    DIR = "dir"  # dir:PATH, a tree laid out like vLLM's
    GIT = "git"  # git:PATH, a local clone
    GIT_URL = "git+url"  # git+URL, a remote repository


@dataclass(frozen=True)
class Source:
    kind: SourceKind
    location: str = ""  # the PATH, or the URL git fetches (without "git+"); "" for pypi
    # wheel: the sha256 a committed file records beside `wheel:NAME`: how the wheel is found again (the
    # wheel cache keeps it by this digest; the index serves it where it is a release file). Not in str().
    digest: str = ""

    @classmethod
    def parse(cls, text: str) -> Source:
        """`text` as `--from` takes it; anything else is bad input (exit 2), before anything is read."""
        if text == "pypi":
            return cls(SourceKind.PYPI)
        prefix, colon, rest = text.partition(":")
        if colon and rest:
            if prefix in (SourceKind.WHEEL, SourceKind.DIR, SourceKind.GIT):
                return cls(SourceKind(prefix), rest)
            if prefix in tuple(f"git+{scheme}" for scheme in GIT_URL_SCHEMES):
                return cls(SourceKind.GIT_URL, text.removeprefix("git+"))
        raise SourceError(f"unknown source {text!r}")

    def __str__(self) -> str:
        if self.kind is SourceKind.PYPI:
            return "pypi"
        if self.kind is SourceKind.GIT_URL:
            return f"git+{self.location}"
        return f"{self.kind}:{self.location}"

    def with_digest(self, sha256: str) -> Source:
        """A recorded `wheel:NAME` with the sha256 recorded beside it; any other source as it is."""
        return replace(self, digest=sha256) if self.kind is SourceKind.WHEEL else self

    def recorded(self) -> Source:
        """The source as a committed file may hold it: `wheel:/some/dir/NAME.whl` is `wheel:NAME.whl`.

        Where a wheel lay is one machine's business; its name and sha256 (recorded beside) are its identity.
        """
        if self.kind is SourceKind.WHEEL:
            return Source(SourceKind.WHEEL, PurePath(self.location).name)
        return self
