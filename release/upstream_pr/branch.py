"""The branch a vLLM contributor pushes: `fused-moe/<slug>` at the pinned tag, one signed-off commit.

Everything is checked before the clone is touched (a git repo, clean, the tag present, the
branch absent, a committer identity, the patch applying to the tag's tree through a
throw-away index), so a refusal changes nothing. Only if `git am` still fails afterwards is
the clone put back: am aborted, the previous branch checked out, the new branch deleted.

The clone is the contributor's, but the commit is made as every git of ours runs
(release/core/git.py): their hooks, ~/.gitconfig and the settings we pin (`format.signOff`,
`am.messageId`, `apply.whitespace`, ...) do not change it, even where their clone's own
configuration sets them. The one thing taken from their configuration is who they are:
the name and email git would sign off with there (`user_identity`), passed explicitly.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import BranchExistsError, CloneError, DirtyCloneError, PatchDoesNotApplyError
from release.core.git import OURS, GitResult, Identity, git, user_identity


@dataclass(frozen=True)
class Clone:
    path: Path

    def git(self, *args: str, env: dict[str, str] | None = None, identity: Identity = OURS) -> GitResult:
        """A git command in the clone; those that write it (a commit, a reflog entry) pass the contributor."""
        return git(*args, cwd=self.path, check=False, env=env, identity=identity)

    def ok(self, *args: str) -> bool:
        return self.git(*args).ok


def branch_name(slug: str) -> str:
    return f"fused-moe/{slug}"


def preflight(clone: Clone, tag: str, branch: str, mail: Path) -> Identity:
    """Every refusal, before anything in the clone changes; returns whom the commit names."""
    if not clone.path.is_dir() or clone.git("rev-parse", "--is-inside-work-tree").out.strip() != "true":
        raise CloneError(f"{clone.path} is not a git work tree")
    status = clone.git("status", "--porcelain=v1", "--untracked-files=normal")
    if not status.ok:
        raise CloneError(f"git status failed in {clone.path}: {status.err.strip()}")
    if status.out.strip():
        first = status.out.splitlines()[0]
        count = len(status.out.splitlines())
        raise DirtyCloneError(f"{clone.path} has uncommitted changes ({count} path(s), first: {first.strip()!r})")
    for marker in ("rebase-apply", "rebase-merge", "MERGE_HEAD", "CHERRY_PICK_HEAD"):
        git_path = clone.git("rev-parse", "--git-path", marker).out.strip()
        if git_path and (clone.path / git_path).exists():
            raise DirtyCloneError(
                f"{clone.path} is in the middle of an operation ({marker} exists)",
                hint="finish or abort it first (`git am --abort`, `git rebase --abort`, `git merge --abort`)",
            )
    if not clone.ok("rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}"):
        raise CloneError(
            f"{clone.path} has no tag {tag}",
            hint=f"fetch it: `git -C {clone.path} fetch https://github.com/vllm-project/vllm tag {tag} --no-tags`",
        )
    if clone.ok("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"):
        raise BranchExistsError(f"{clone.path} already has a branch {branch}")
    contributor = user_identity(clone.path)
    if contributor is None:
        raise CloneError(
            f"git in {clone.path} has no committer identity for the Signed-off-by line",
            hint=f"`git -C {clone.path} config user.name 'Your Name'` and `... config user.email you@example.com`",
        )
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-index-") as tmp:
        # A scratch index holding the tag's tree: checks the patch without a checkout.
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        read = clone.git("read-tree", f"refs/tags/{tag}^{{tree}}", env=env)
        if not read.ok:
            raise CloneError(f"cannot read the tree of {tag} in {clone.path}: {read.err.strip()}")
        check = clone.git("apply", "--cached", "--check", str(mail), env=env)
    if not check.ok:
        raise PatchDoesNotApplyError(f"{mail.name} does not apply to {tag} in {clone.path}: {_first_line(check.err)}")
    return contributor


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "git gave no reason"


def current_position(clone: Clone) -> str:
    branch = clone.git("symbolic-ref", "--quiet", "--short", "HEAD")
    return branch.out.strip() if branch.ok else clone.git("rev-parse", "HEAD").out.strip()


def make_branch(clone: Clone, tag: str, branch: str, mail: Path) -> str:
    """Create `branch` at `tag` with `mail` as one signed-off commit; returns the commit id."""
    contributor = preflight(clone, tag, branch, mail)
    previous = current_position(clone)
    switched = clone.git("switch", "--quiet", "--no-track", "-c", branch, f"refs/tags/{tag}", identity=contributor)
    if not switched.ok:
        raise CloneError(f"git switch -c {branch} {tag} failed: {_first_line(switched.err)}")
    # --keep-non-patch: only "[PATCH]" is dropped from the subject, so "[Bugfix] ..." survives.
    applied = clone.git("am", "--signoff", "--keep-non-patch", "--quiet", str(mail), identity=contributor)
    if not applied.ok:
        clone.git("am", "--abort", identity=contributor)
        clone.git("switch", "--quiet", *(["--detach"] if _is_sha(previous) else []), previous, identity=contributor)
        clone.git("branch", "-D", branch, identity=contributor)
        raise PatchDoesNotApplyError(f"git am {mail.name} failed on {tag}: {_first_line(applied.err)}")
    return clone.git("rev-parse", "HEAD").out.strip()


def _is_sha(ref: str) -> bool:
    return len(ref) == 40 and all(c in "0123456789abcdef" for c in ref)
