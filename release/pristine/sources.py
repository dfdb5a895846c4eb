"""`--from SOURCE`: pick the reader for a source and read one tag's pristine subtree."""

from __future__ import annotations

from pathlib import Path

from release.core.errors import SourceError, WheelIntegrityError
from release.core.versions import canonical_tag
from release.model.lines import Line
from release.model.tree import UpstreamTree
from release.pristine import safe
from release.pristine.dir_source import read_dir
from release.pristine.git_source import read_git
from release.pristine.wheel import read_pypi, read_wheel

DEFAULT_GIT_URL = "https://github.com/vllm-project/vllm.git"
DEFAULT_SOURCE = f"git+{DEFAULT_GIT_URL}"


def fetch(tag: str, source: str, line: Line | None = None, *, lazy: bool = False) -> UpstreamTree:
    """`tag`'s pristine code: the modules of `line` (default: the head's subtree), keyed below its root.

    Proven to be that tag and to stay inside the subtree: each reader proves the version and
    refuses links where it reads (release.pristine.safe); the names of every tree are checked
    here, for every kind of source, before anyone writes them. A wheel's sha256 in the tree is one
    computed on its bytes, unless `lazy` (`train check`, which only compares): then `--from pypi`
    may read by range requests, and the sha256 is the index's claim.
    """
    tree = _read(canonical_tag(tag), source, line, lazy)
    safe.check_tree(tree.files, source)
    if tree.wheel_sha256 and not (lazy or tree.wheel_verified):
        # What rebase and train add record must rest on a digest checked on the bytes (see wheel.py).
        raise WheelIntegrityError(f"{tree.wheel}: its sha256 was not verified on the bytes read; nothing was used")
    return tree


def recorded_source(source: str) -> str:
    """`source` as a committed file may hold it: `wheel:/some/dir/NAME.whl` is `wheel:NAME.whl`.

    Where a wheel lay is one machine's business; its name and sha256 (recorded beside) are its identity.
    """
    kind, _, rest = source.partition(":")
    return f"wheel:{Path(rest).name}" if kind == "wheel" and rest else source


def _read(tag: str, source: str, line: Line | None, lazy: bool) -> UpstreamTree:
    kind, _, rest = source.partition(":")
    if source == "pypi":
        return read_pypi(tag, line, lazy)
    if kind == "wheel" and rest:
        return read_wheel(tag, Path(rest), line)
    if kind == "dir" and rest:
        return read_dir(tag, Path(rest), source, line)
    if kind == "git" and rest:
        return read_git(tag, rest, source, line)
    if kind == "git+http" or kind == "git+https" or kind == "git+file" or kind == "git+ssh":
        return read_git(tag, source.removeprefix("git+"), source, line)
    raise SourceError(f"unknown source {source!r}")
