"""`pq new SLUG`: the message template of the next patch, named with the next free number."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from release.core.errors import PatchQueueTreeError
from release.core.journal import write_atomic
from release.core.layout import Layout
from release.core.versions import shown
from release.pq.export import used_names
from release.pq.names import NAME_LINE_RE, SLUG_LENGTH, SLUG_RE, new_name
from release.pq.template import template
from release.pq.tree import PqTree


def new_patch(layout: Layout, path: Path, slug: str) -> tuple[str, Path]:
    """Write the template for patch NNNN-SLUG.patch into the work tree's .git/; returns the name and the file."""
    if not SLUG_RE.match(slug) or len(slug) > SLUG_LENGTH:
        raise PatchQueueTreeError(
            f"{shown(slug)} is not a slug: at most {SLUG_LENGTH} lowercase letters, digits and '-', e.g. shape-check",
            hint="the number is chosen for you: the next one no patch, retired patch or variant has used",
        )
    tree = PqTree.open(path)
    state = tree.state()
    messages = tree.repo.run("log", "--format=%B", f"{state.base}..HEAD").out
    named = {m.group("name") for m in (NAME_LINE_RE.match(line) for line in messages.splitlines()) if m}
    name = new_name(slug, used_names(layout) | named)
    write_atomic(tree.template, template(name, datetime.now(UTC).date()).encode("utf-8"))
    return name, tree.template
