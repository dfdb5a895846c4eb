"""`pq import`: the work tree made, the head's (patches/series on the pinned tag) or a release line's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core import log
from release.core.errors import EXIT_CONFLICT, EXIT_OK
from release.core.layout import Layout
from release.pq.importer import import_queue
from release.pq.line import import_line
from release.pq.report import shown


@dataclass(frozen=True)
class ImportOptions:
    """What `pq import` was asked: the work tree, whether to replace one holding work, and a line's tree
    (--line, --tag) instead of the head's."""

    dir: Path
    force: bool = False
    line: str | None = None
    tag: str | None = None


def make_tree(layout: Layout, options: ImportOptions) -> int:
    """`pq import`: the work tree made, then what it holds and what to do next on stdout."""
    if options.line or options.tag:
        return _import_line(layout, options.dir, options.line, options.tag, options.force)
    return _import_head(layout, options.dir, options.force)


def _import_head(layout: Layout, path: Path, force: bool) -> int:
    done = import_queue(layout, path, force)
    log.out(
        f"{'replaced' if done.replaced else 'made'} {shown(path)}: vllm {done.tag} pristine (tag `pristine`), "
        f"then {len(done.patches)} patch commit(s) on branch patch-queue"
    )
    for patch in done.patches:
        log.out(f"  {patch.name}  {patch.subject}")
    log.out(
        f"next: change the commits with git in {shown(path)}; `python -m release pq new SLUG` starts a new "
        "patch's message; `python -m release pq export` writes patches/ and vendor/"
    )
    return EXIT_OK


def _import_line(layout: Layout, path: Path, line: str | None, tag: str | None, force: bool) -> int:
    done = import_line(layout, path, line, tag, force)
    log.out(
        f"{'replaced' if done.replaced else 'made'} {shown(path)}: line {done.line}, vllm {done.tag} pristine "
        f"(tag `pristine`), then the line's series on branch patch-queue"
    )
    for name in done.patches:
        log.out(f"  {name}{'  (common patch, for the line)' if name in done.wanted else ''}")
    for name, files in done.left_out.items():
        taken = "the parts on the line are in its commit above" if name in done.wanted else "nothing of it is"
        log.out(
            f"  {name}: the line has no counterpart of {', '.join(files)} (patches/lines.toml [line.maps]); "
            f"{taken}: add what the line needs as a commit with `Patch-Name: {name}` (export writes it as the "
            "line's variant)"
        )
    if done.stopped is not None:
        name, message = done.stopped
        log.out(
            f"{name} does not merge on {done.tag}: git am stopped there ({message.strip().splitlines()[0]}). "
            f"Resolve it in {shown(path)} (`git status` lists the files with conflict markers), `git add` them, "
            "`git am --continue`; then `python -m release pq export`"
        )
        return EXIT_CONFLICT
    log.out(
        f"next: change the commits with git in {shown(path)}; `python -m release pq export` writes the line's variants"
    )
    return EXIT_OK
