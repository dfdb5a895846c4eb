"""`dir:PATH`: a tree laid out like vLLM's."""

from __future__ import annotations

import os
from pathlib import Path

from release.core.errors import SourceError
from release.core.layout import UPSTREAM_SUBTREE
from release.pristine import safe
from release.pristine.tree import UpstreamTree, _flashinfer_pin

# -------------------------------------------------------------------------- trees


def read_dir(tag: str, root: Path, source: str) -> UpstreamTree:
    subtree = root / UPSTREAM_SUBTREE
    if not subtree.is_dir():
        raise SourceError(
            f"{root} has no {UPSTREAM_SUBTREE}/", hint="dir:PATH is the root of a tree laid out like vLLM's"
        )
    # A link anywhere from PATH down would read (and vendor, hash, ship) files from elsewhere.
    safe.check_no_links(root, UPSTREAM_SUBTREE, source)
    safe.prove_dir_version(root, tag, source)
    files = safe.read_regular_tree(subtree, source)
    pin = ""
    if os.path.lexists(root / "requirements" / "cuda.txt"):
        requirements = safe.check_no_links(root, "requirements/cuda.txt", source)
        pin = _flashinfer_pin(safe.read_regular_file(requirements, source).decode("utf-8", "replace"))
    return UpstreamTree(tag=tag, source=source, files=files, flashinfer=pin)
