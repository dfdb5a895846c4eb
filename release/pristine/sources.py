"""`--from SOURCE`: pick the reader for a source and read one tag's pristine subtree."""

from __future__ import annotations

from pathlib import Path

from release.core.errors import SourceError
from release.core.versions import version_of_tag
from release.pristine.dir_source import read_dir
from release.pristine.git_source import read_git
from release.pristine.tree import UpstreamTree
from release.pristine.wheel import read_pypi, read_wheel

DEFAULT_GIT_URL = "https://github.com/vllm-project/vllm.git"
DEFAULT_SOURCE = f"git+{DEFAULT_GIT_URL}"


def fetch(tag: str, source: str) -> UpstreamTree:
    version_of_tag(tag)
    kind, _, rest = source.partition(":")
    if source == "pypi":
        return read_pypi(tag)
    if kind == "wheel" and rest:
        return read_wheel(tag, Path(rest), source_label=source)
    if kind == "dir" and rest:
        return read_dir(tag, Path(rest), source)
    if kind == "git" and rest:
        return read_git(tag, rest, source)
    if kind == "git+http" or kind == "git+https" or kind == "git+file" or kind == "git+ssh":
        return read_git(tag, source.removeprefix("git+"), source)
    raise SourceError(f"unknown source {source!r}")
