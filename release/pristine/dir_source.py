"""`dir:PATH`: a tree laid out like vLLM's."""

from __future__ import annotations

from pathlib import Path

from release.core.errors import SourceError
from release.core.layout import UPSTREAM_SUBTREE
from release.pristine.tree import UpstreamTree, _flashinfer_pin

# -------------------------------------------------------------------------- trees


def read_dir(tag: str, root: Path, source: str) -> UpstreamTree:
    subtree = root / UPSTREAM_SUBTREE
    if not subtree.is_dir():
        raise SourceError(
            f"{root} has no {UPSTREAM_SUBTREE}/", hint="dir:PATH is the root of a tree laid out like vLLM's"
        )
    from release.core.layout import read_tree

    requirements = root / "requirements" / "cuda.txt"
    pin = _flashinfer_pin(requirements.read_text()) if requirements.is_file() else ""
    return UpstreamTree(tag=tag, source=source, files=read_tree(subtree), flashinfer=pin)
