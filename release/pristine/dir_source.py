"""`dir:PATH`: a tree laid out like vLLM's."""

from __future__ import annotations

import os
from pathlib import Path

from release.core.errors import SourceError
from release.core.layout import UPSTREAM_SUBTREE
from release.model.lines import Line
from release.model.tree import UpstreamTree
from release.pristine import safe
from release.pristine.metadata import requirements_file_pin

# -------------------------------------------------------------------------- trees


def read_dir(tag: str, root: Path, source: str, line: Line | None = None) -> UpstreamTree:
    subtree = root / (line.root if line else UPSTREAM_SUBTREE)
    if not subtree.is_dir():
        raise SourceError(
            f"{root} has no {line.root if line else UPSTREAM_SUBTREE}/",
            hint="dir:PATH is the root of a tree laid out like vLLM's",
        )
    root_path = line.root if line else UPSTREAM_SUBTREE
    # A link anywhere from PATH down would read (and vendor, hash, ship) files from elsewhere.
    safe.check_no_links(root, root_path, source)
    safe.prove_dir_version(root, tag, source)
    files = safe.read_regular_tree(subtree, source)
    if line is not None:
        files = line.relative({f"{line.root}/{name}": data for name, data in files.items()})
    pin = ""
    if os.path.lexists(root / "requirements" / "cuda.txt"):
        requirements = safe.check_no_links(root, "requirements/cuda.txt", source)
        pin = requirements_file_pin(safe.read_regular_file(requirements, source).decode("utf-8", "replace"))
    return UpstreamTree(tag=tag, source=source, files=files, flashinfer=pin)
