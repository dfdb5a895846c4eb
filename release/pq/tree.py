"""pq's git work tree with upstream paths, and what it remembers (model/tree.py: a tag's files in memory).

The work tree `pq import` makes.

Its first commit is the pinned tag's pristine subtree (tagged `pristine`), each later commit one
patch; the branch is `patch-queue`. `.git/vllm-fused-moe-pq.json` records the checkout it belongs
to, the pinned tag, the pristine commit, and `synced`: the commit whose export patches/ held when
import or export last ran, so that a new import knows whether it would throw work away.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from release.core.errors import PatchQueueTreeError
from release.core.files import read_text
from release.core.git import WorkRepo
from release.core.journal import write_atomic
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.core.parse import parse_json

BRANCH = "patch-queue"
BASE_TAG = "pristine"
STATE_FILE = "vllm-fused-moe-pq.json"
TEMPLATE_FILE = "pq-template"  # in .git/, so that it is never part of a commit
# What a git command in progress leaves in .git/ (the maintainer's rebase -i, am, merge, ...).
IN_PROGRESS = {
    "rebase-merge": "a `git rebase`",
    "rebase-apply": "a `git rebase` or `git am`",
    "MERGE_HEAD": "a `git merge`",
    "CHERRY_PICK_HEAD": "a `git cherry-pick`",
    "REVERT_HEAD": "a `git revert`",
    "BISECT_LOG": "a `git bisect`",
}


def default_dir(layout: Layout) -> Path:
    return layout.work / "pq"


@dataclass(frozen=True)
class PqState:
    root: str  # the checkout whose patches/ and vendor/ the tree belongs to
    tag: str  # the pinned tag its pristine commit holds
    base: str  # the pristine commit
    synced: str  # HEAD when patches/ last held exactly this tree's export
    line: str = ""  # the release line of `pq import --line`; "" for the head's tree
    wanted: tuple[str, ...] = ()  # the common patches it puts in for the line, to become its variants


class PqTree:
    """A patch-queue work tree; `open` refuses a directory `pq import` did not make."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.repo = WorkRepo(path)

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"

    @property
    def template(self) -> Path:
        return self.git_dir / TEMPLATE_FILE

    @property
    def subtree(self) -> Path:
        return self.path / UPSTREAM_SUBTREE

    def is_ours(self) -> bool:
        return (self.git_dir / STATE_FILE).is_file()

    @classmethod
    def open(cls, path: Path) -> PqTree:
        tree = cls(path)
        if not tree.is_ours():
            raise PatchQueueTreeError(
                f"{path} is not a patch-queue work tree (no .git/{STATE_FILE})",
                hint="make one with `python -m release pq import` (--dir names another place)",
            )
        return tree

    def state(self) -> PqState:
        file = self.git_dir / STATE_FILE
        try:
            data = parse_json(read_text(file, error=PatchQueueTreeError), where=str(file), error=ValueError)
            kept = {key: str(data[key]) for key in ("root", "tag", "base", "synced")}
            return PqState(**kept, line=str(data.get("line", "")), wanted=tuple(map(str, data.get("wanted", []))))
        except (PatchQueueTreeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PatchQueueTreeError(
                f"{file} is damaged ({exc.__class__.__name__}: {exc})",
                hint="start again from patches/ with `python -m release pq import --force`",
            ) from None

    def save_state(self, state: PqState) -> None:
        data = {key: value for key, value in asdict(state).items() if value or key not in ("line", "wanted")}
        write_atomic(self.git_dir / STATE_FILE, (json.dumps(data, indent=2) + "\n").encode("utf-8"))

    def head(self) -> str:
        result = self.repo.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
        return result.out.strip() if result.ok else ""

    def in_progress(self) -> str | None:
        """The git command the maintainer left half-done here, if any."""
        return next((what for name, what in IN_PROGRESS.items() if (self.git_dir / name).exists()), None)

    def changes(self) -> list[str]:
        """Uncommitted changes and untracked files, as `git status --porcelain` lines."""
        out = self.repo.run("status", "--porcelain", "--untracked-files=all").out
        return [line for line in out.splitlines() if line.strip()]

    def unsaved(self) -> list[str]:
        """What an import over this tree would throw away: commits not exported, changes, a git command half-done."""
        found: list[str] = []
        try:
            state = self.state()
        except PatchQueueTreeError as exc:
            return [str(exc)]
        head = self.head()
        if head != state.synced:
            listing = self.repo.run("rev-list", "--count", f"{state.synced}..{head}", check=False)
            count = listing.out.strip() if listing.ok and head else "?"
            found.append(f"HEAD is not what patches/ was last exported from ({count} commit(s) since)")
        if self.in_progress():
            found.append(f"{self.in_progress()} in progress")
        changes = self.changes()
        if changes:
            found.append(f"{len(changes)} uncommitted or untracked file(s), e.g. {changes[0].strip()}")
        return found

    def commits(self, base: str) -> list[str]:
        """base..HEAD, oldest first: a straight line of commits on the pristine commit."""
        head = self.head()
        if not head:
            raise PatchQueueTreeError(f"{self.path} has no commit at HEAD")
        if not self.repo.run("merge-base", "--is-ancestor", base, head, check=False).ok:
            raise PatchQueueTreeError(
                f"HEAD of {self.path} does not descend from the pristine commit {base[:12]} (tag {BASE_TAG})",
                hint=f"rebase your commits onto it (`git -C {self.path} rebase {BASE_TAG}`), or start again with "
                "`python -m release pq import --force`",
            )
        merges = self.repo.run("rev-list", "--min-parents=2", f"{base}..{head}").out.split()
        if merges:
            raise PatchQueueTreeError(
                f"{self.path} holds merge commit(s) {', '.join(m[:12] for m in merges)}: a patch is one commit on "
                "the one before it",
                hint=f"make the history a straight line (`git -C {self.path} rebase {BASE_TAG}`)",
            )
        return self.repo.run("rev-list", "--reverse", f"{base}..{head}").out.split()

    def message(self, commit: str) -> str:
        return self.repo.run("log", "-1", "--format=%B", commit).out

    def subject(self, commit: str) -> str:
        return self.repo.run("log", "-1", "--format=%s", commit).out.strip()

    def is_empty(self, commit: str) -> bool:
        return self.repo.run("diff-tree", "--quiet", f"{commit}^", commit, check=False).ok
