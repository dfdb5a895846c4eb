"""`pq import`: patches/series as commits on the pinned tag's pristine subtree.

The pristine subtree comes from vendor/ with the series undone (what `check` does), so import
needs no network and proves vendor/ clean on the way. The tree is built beside its place and
renamed into it, so a failed import leaves the old work tree as it was; an old tree holding
work that was never exported is kept unless `--force`.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import OutputNotWritableError, PatchQueueTreeError
from release.core.git import WorkRepo
from release.core.layout import Layout, writable_dir_problem
from release.core.lock import repo_lock
from release.model.patch import Patch
from release.pq.names import mark
from release.pq.tree import BASE_TAG, BRANCH, PqState, PqTree
from release.queue.drift import require_pristine
from release.queue.load import Queue


@dataclass(frozen=True)
class Imported:
    path: Path
    tag: str
    patches: list[Patch]
    replaced: bool  # an older work tree was there


def refuse_to_lose_work(path: Path, force: bool) -> None:
    """A directory we may replace: none, an empty one, or a work tree of ours with nothing unexported."""
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir() or path.is_symlink():
        raise PatchQueueTreeError(f"{path} exists and is not a directory; nothing was changed")
    tree = PqTree(path)
    if not tree.is_ours():
        if any(path.iterdir()):
            raise PatchQueueTreeError(
                f"{path} exists and is not a patch-queue work tree; nothing was changed",
                hint="name another place with --dir, or move that directory away yourself",
            )
        return
    unsaved = tree.unsaved()
    if unsaved and not force:
        raise PatchQueueTreeError(
            f"{path} holds work that was never exported: {'; '.join(unsaved)}",
            hint="export it first (`python -m release pq export`), or pass --force to drop it",
        )


def import_queue(layout: Layout, path: Path, force: bool = False) -> Imported:
    problem = writable_dir_problem(path.parent)  # the work tree is made beside it, then renamed into place
    if problem:
        raise OutputNotWritableError(f"cannot make the work tree {path}: {problem}")
    with repo_lock(layout, "pq import"):
        queue = Queue.load(layout)
        pristine = require_pristine(layout, queue)
        refuse_to_lose_work(path, force)
        replaced = path.exists()
        staging = path.parent / f".{path.name}.importing"
        shutil.rmtree(staging, ignore_errors=True)  # a killed import's leftover: we hold the lock
        try:
            build(staging, layout, queue, pristine)
            if replaced:
                shutil.rmtree(path)
            staging.rename(path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return Imported(path, queue.pin.tag, queue.patches, replaced)


def build(path: Path, layout: Layout, queue: Queue, pristine: dict[str, bytes]) -> None:
    """The pristine commit, then one `git am` per patch (committer and its date fixed, so an
    unchanged queue gives the same commits every time)."""
    path.mkdir(parents=True)
    repo = WorkRepo(path)
    repo.run("init", "--quiet", f"--initial-branch={BRANCH}")
    base = repo.commit_subtree(
        pristine,
        f"vllm {queue.pin.tag}: the pristine subtree\n\n"
        "Made by `python -m release pq import` from vendor/ with patches/series undone.\n"
        "Every commit after this one is one patch; `python -m release pq export` writes them back.",
    )
    repo.run("tag", BASE_TAG, base)
    mails = path / ".git" / "pq-import"
    mails.mkdir()
    for patch in queue.patches:
        mail = mails / patch.name
        mail.write_text(mark(patch.text, patch.name), encoding="utf-8")
        result = repo.run("am", "--keep", "--quiet", str(mail), check=False, fixed_date=True)
        if not result.ok:
            # vendor/ passed `check`, so every patch applies in order: this is not the maintainer's doing.
            raise PatchQueueTreeError(f"{patch.name} did not apply on the pristine tree (`git am`): {result.message}")
    shutil.rmtree(mails)
    tree = PqTree(path)
    tree.save_state(PqState(root=str(layout.root), tag=queue.pin.tag, base=base, synced=tree.head()))
