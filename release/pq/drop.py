"""`pq drop NAME`: a patch out of the queue in one command (what `git rebase -i` then `pq export` do by hand).

In the work tree (`pq import` makes it when there is none; one holding work not exported is refused),
the patch's commit is taken out of the line of commits with `git rebase --onto C^ C`, the later
commits replayed on the one before it; a later patch that does not apply without it stops the drop
(exit 3) and the rebase is aborted, so nothing changes. Then `pq export` writes patches/, its
series and vendor/ in one swap, and drops from every release line what `pq carry` and `pq skip`
wrote about the patch (a line that takes it as it is refuses the drop, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core.errors import ConflictError, PatchQueueTreeError, UnknownPatchError
from release.core.git import FIXED_DATE, git
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.pq.export import Export, export_tree, refuse_line_tree, require_exportable
from release.pq.importer import import_tree, refuse_unwritable
from release.pq.names import unmark
from release.pq.report import show_export
from release.pq.tree import BRANCH, PqTree
from release.queue.snapshot import Checkout


@dataclass(frozen=True)
class DropOptions:
    """What `pq drop` was asked: the patch, the work tree, and --json."""

    patch: str
    dir: Path
    json: bool = False


def drop(layout: Layout, options: DropOptions) -> int:
    """`pq drop`: the patch taken out and the queue exported, said as `pq export` says it."""
    return show_export(drop_patch(layout, options.dir, options.patch), options.dir, False, options.json)


def drop_patch(layout: Layout, path: Path, name: str) -> Export:
    """The import (where there is no work tree), the rebase and the export, under one lock and one read of the
    checkout: neither the import nor the rebase writes patches/ or vendor/, so the export starts from it too."""
    if not PqTree(path).is_ours() and not path.exists():
        refuse_unwritable(path)
    with repo_lock(layout, "pq drop"):
        return _drop(Checkout.load(layout), path, name)


def _drop(checkout: Checkout, path: Path, name: str) -> Export:
    if not PqTree(path).is_ours() and not path.exists():
        import_tree(checkout, path)
    tree = PqTree.open(path)
    require_exportable(tree)
    state = tree.state()
    refuse_line_tree(path, state)
    if tree.head() != state.synced:
        raise PatchQueueTreeError(
            f"{path} holds commits not exported yet: drop would export them with it",
            hint=f"export them first (`python -m release pq export`), or drop by hand (`git -C {path} rebase -i "
            "pristine`, then `pq export`)",
        )
    commits = tree.commits(state.base)
    named = {commit: unmark(tree.message(commit))[0] for commit in commits}
    found = [c for c, names in named.items() if any(n == name or n.split("-", 1)[0] == name for n in names)]
    if len(found) != 1:
        listed = ", ".join(n for names in named.values() for n in names) or "none"
        raise UnknownPatchError(f"{name!r} is not one patch of the work tree {path} ({listed})")
    [commit] = found
    before = tree.head()
    moved = git(
        "rebase", "--quiet", "--onto", f"{commit}^", commit, BRANCH,
        cwd=path, check=False, env={"GIT_COMMITTER_DATE": FIXED_DATE},
    )  # fmt: skip
    if not moved.ok:
        later = tree.repo.run("log", "-1", "--format=%s", "REBASE_HEAD", check=False).out.strip()
        git("rebase", "--abort", cwd=path, check=False)
        git("reset", "--quiet", "--hard", before, cwd=path, check=False)
        raise ConflictError(
            f"dropping {named[commit][0]}: a later patch ({later or 'one after it'}) does not apply without it; "
            "nothing was changed",
            hint=f"drop that one too, or change it so that it stands alone (`git -C {path} rebase -i pristine`), "
            "then `python -m release pq export`",
        )
    try:
        require_exportable(tree)
        return export_tree(checkout, tree, state)
    except BaseException:
        git("reset", "--quiet", "--hard", before, cwd=path, check=False)  # the tree as patches/ still is
        raise
