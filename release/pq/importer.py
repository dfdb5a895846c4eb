"""`pq import`: patches/series as commits on the pinned tag's pristine subtree.

The pristine subtree comes from vendor/ with the series undone (what `check` does), so import
needs no network and proves vendor/ clean on the way. The tree is built beside its place and
renamed into it, so a failed import leaves the old work tree as it was; an old tree holding
work that was never exported is kept unless `--force`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from release.core.errors import OutputNotWritableError, PatchQueueTreeError
from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE, Layout, writable_dir_problem
from release.core.lock import repo_lock
from release.model.patch import Patch
from release.pq.names import mark
from release.pq.tree import BASE_TAG, BRANCH, PqState, PqTree
from release.queue.load import Queue
from release.queue.snapshot import Checkout

T = TypeVar("T")


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
    refuse_unwritable(path)
    with repo_lock(layout, "pq import"):
        return import_tree(Checkout.load(layout), path, force)


def import_tree(checkout: Checkout, path: Path, force: bool = False) -> Imported:
    """The head's work tree made at `path` from the checkout (the caller holds the repository lock and read the
    checkout under it)."""
    queue, pristine = checkout.queue, checkout.pristine()
    _, replaced = into_place(path, force, lambda staging: build(staging, checkout.layout, queue, pristine))
    return Imported(path, queue.pin.tag, queue.patches, replaced)


def refuse_unwritable(path: Path) -> None:
    problem = writable_dir_problem(path.parent)  # the work tree is made beside it, then renamed into place
    if problem:
        raise OutputNotWritableError(f"cannot make the work tree {path}: {problem}")


def into_place(path: Path, force: bool, make: Callable[[Path], T]) -> tuple[T, bool]:
    """`make` the work tree beside `path`, then rename it into place; returns what `make` did and whether an
    old tree was replaced. The caller holds the repository lock."""
    refuse_to_lose_work(path, force)
    replaced = path.exists()
    staging = path.parent / f".{path.name}.importing"
    shutil.rmtree(staging, ignore_errors=True)  # a killed import's leftover: we hold the lock
    try:
        made = make(staging)
        if replaced:
            shutil.rmtree(path)
        staging.rename(path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return made, replaced


def build(path: Path, layout: Layout, queue: Queue, pristine: dict[str, bytes]) -> None:
    """The pristine commit, then one `git am` per patch (committer and its date fixed, so an
    unchanged queue gives the same commits every time)."""
    repo = init(path)
    base = first_commit(
        repo,
        pristine,
        f"vllm {queue.pin.tag}: the pristine subtree\n\n"
        "Made by `python -m release pq import` from vendor/ with patches/series undone.\n"
        "Every commit after this one is one patch; `python -m release pq export` writes them back.",
    )
    stopped = apply_mails(repo, [(p.name, p) for p in queue.patches], "--keep")
    if stopped is not None:
        # vendor/ passed `check`, so every patch applies in order: this is not the maintainer's doing.
        raise PatchQueueTreeError(f"{stopped[0]} did not apply on the pristine tree (`git am`): {stopped[1]}")
    tree = PqTree(path)
    tree.save_state(PqState(root=str(layout.root), tag=queue.pin.tag, base=base, synced=tree.head()))


def init(path: Path, root: str = UPSTREAM_SUBTREE) -> WorkRepo:
    path.mkdir(parents=True)
    repo = WorkRepo(path, root)
    repo.run("init", "--quiet", f"--initial-branch={BRANCH}")
    return repo


def first_commit(repo: WorkRepo, files: dict[str, bytes], message: str) -> str:
    """The pristine commit of the branch, tagged BASE_TAG."""
    base = repo.commit_subtree(files, message)
    repo.run("tag", BASE_TAG, base)
    return base


def apply_mails(repo: WorkRepo, patches: list[tuple[str, Patch]], *flags: str) -> tuple[str, str] | None:
    """Each patch as one commit by one `git am` (marked with its `Patch-Name:`, committer and date fixed);
    where one does not apply, git's own state is left as it is (`git am --continue` goes on with the rest)
    and (its name, git's message) returned."""
    mails = repo.path / ".git" / "pq-import"
    mails.mkdir()
    files = []
    for number, (name, patch) in enumerate(patches, 1):
        mail = mails / f"{number:04d}-{name}"
        mail.write_text(mark(patch.text, name), encoding="utf-8")
        files.append(str(mail))
    before = repo.head()
    result = repo.run("am", *flags, "--quiet", *files, check=False, fixed_date=True) if files else None
    shutil.rmtree(mails)  # git am keeps its own copy of every mail it has not applied yet
    if result is None or result.ok:
        return None
    done = int(repo.run("rev-list", "--count", f"{before}..HEAD").out)
    return patches[done][0], result.message
