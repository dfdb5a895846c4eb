"""Which patch PATCH names, and whether anything of it is left to send upstream."""

from __future__ import annotations

import re
from pathlib import Path

from release.core.errors import AlreadyUpstreamError, UnknownPatchError
from release.core.layout import Layout
from release.model.patch import APPLIED_UPSTREAM, Patch


def resolve(layout: Layout, spec: str) -> Path:
    """The patch file PATCH names; retired patches are found too, so they can be refused by name."""
    given = Path(spec)
    if given.is_file():
        return given
    for directory in (layout.patches, layout.retired):
        if (directory / spec).is_file():
            return directory / spec
    if re.fullmatch(r"\d{1,4}", spec, re.ASCII):
        prefix = spec.zfill(4) + "-"
        matches = sorted(p for d in (layout.patches, layout.retired) if d.is_dir() for p in d.glob(f"{prefix}*.patch"))
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UnknownPatchError(
                f"{spec} names {len(matches)} patches: " + ", ".join(p.name for p in matches),
                hint="give the full file name",
            )
    raise UnknownPatchError(f"no patch {spec!r} in {layout.patches} or {layout.retired}")


def refuse_if_upstream(layout: Layout, path: Path, patch: Patch) -> None:
    since = patch.trailers.get(APPLIED_UPSTREAM, "").strip()
    if since:
        raise AlreadyUpstreamError(f"{patch.name} is already upstream since vLLM {since} (Applied-Upstream)")
    if path.resolve().parent == layout.retired.resolve():
        raise AlreadyUpstreamError(f"{patch.name} is retired to patches/retired/: already upstream")
