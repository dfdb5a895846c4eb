"""`--from SOURCE`: pick the reader for a source and read one tag's pristine subtree."""

from __future__ import annotations

from pathlib import Path

from release.core.errors import WheelIntegrityError
from release.core.versions import canonical_tag
from release.model.lines import Line
from release.model.source import Source, SourceKind
from release.model.tree import UpstreamTree
from release.pristine import safe
from release.pristine.dir_source import read_dir
from release.pristine.git_source import read_git
from release.pristine.wheel import read_pypi, read_wheel


def fetch(tag: str, source: Source, line: Line | None = None, *, lazy: bool = False) -> UpstreamTree:
    """`tag`'s pristine code: the modules of `line` (default: the head's subtree), keyed below its root.

    Proven to be that tag and to stay inside the subtree: each reader proves the version and
    refuses links where it reads (release.pristine.safe); the names of every tree are checked
    here, for every kind of source, before anyone writes them. A wheel's sha256 in the tree is one
    computed on its bytes, unless `lazy` (`train check`, which only compares): then `--from pypi`
    may read by range requests, and the sha256 is the index's claim.
    """
    tree = _read(canonical_tag(tag), source, line, lazy)
    safe.check_tree(tree.files, str(source))
    if tree.wheel_sha256 and not (lazy or tree.wheel_verified):
        # What rebase and train add record must rest on a digest checked on the bytes (see wheel.py).
        raise WheelIntegrityError(f"{tree.wheel}: its sha256 was not verified on the bytes read; nothing was used")
    return tree


def _read(tag: str, source: Source, line: Line | None, lazy: bool) -> UpstreamTree:
    match source.kind:
        case SourceKind.PYPI:
            return read_pypi(tag, line, lazy)
        case SourceKind.WHEEL:
            return read_wheel(tag, Path(source.location), line, sha256=source.digest, lazy=lazy)
        case SourceKind.DIR:
            return read_dir(tag, Path(source.location), str(source), line)
        case SourceKind.GIT | SourceKind.GIT_URL:
            return read_git(tag, source, line)
