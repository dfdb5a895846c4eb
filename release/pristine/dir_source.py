"""`dir:PATH`: a tree laid out like vLLM's."""

from __future__ import annotations

from pathlib import Path

from release.core.errors import SourceError
from release.core.layout import UPSTREAM_SUBTREE
from release.pristine.tree import UpstreamTree, _flashinfer_pin
from release.queue.lines import Line

# -------------------------------------------------------------------------- trees


def read_dir(tag: str, root: Path, source: str, line: Line | None = None) -> UpstreamTree:
    subtree = root / (line.root if line else UPSTREAM_SUBTREE)
    if not subtree.is_dir():
        raise SourceError(
            f"{root} has no {line.root if line else UPSTREAM_SUBTREE}/",
            hint="dir:PATH is the root of a tree laid out like vLLM's",
        )
    from release.core.layout import read_tree

    requirements = root / "requirements" / "cuda.txt"
    pin = _flashinfer_pin(requirements.read_text()) if requirements.is_file() else ""
    files = read_tree(subtree)
    if line is not None:
        files = line.relative({f"{line.root}/{name}": data for name, data in files.items()})
    return UpstreamTree(tag=tag, source=source, files=files, flashinfer=pin)
