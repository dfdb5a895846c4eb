"""`pq new SLUG`: the message template of the next patch, named with the next free number."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from release.core import log
from release.core.errors import EXIT_OK, PatchQueueTreeError
from release.core.journal import write_atomic
from release.core.layout import Layout
from release.core.versions import shown
from release.pq.export import used_names
from release.pq.names import NAME_LINE_RE, SLUG_LENGTH, SLUG_RE, new_name
from release.pq.report import shown as shown_path
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


@dataclass(frozen=True)
class NewOptions:
    """What `pq new` was asked: the work tree and the new patch's slug."""

    dir: Path
    slug: str


def start_patch(layout: Layout, options: NewOptions) -> int:
    """`pq new`: the template written, and the commit that answers it named on stdout."""
    path = options.dir
    name, file = new_patch(layout, path, options.slug)
    log.out(f"template: {shown_path(file)} ({name})")
    log.out(
        f"next: change the files under {shown_path(path)}, then `git -C {shown_path(path)} commit -a -t "
        f"{file.relative_to(path).as_posix()}` and answer every <...>; then `python -m release pq export`"
    )
    return EXIT_OK
