"""Every git call of the tooling, and nothing else (after Electron's `script/lib/git.py`).

One runner, `git()`: an explicit argument list, never a shell, a fixed identity and
configuration so results do not depend on the machine, and one way to fail: `GitError`,
which carries the command and git's own message. Callers that expect a failure as an
answer (does this patch apply?) pass `check=False` and read `ok`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import GitError, ToolMissingError
from release.core.layout import UPSTREAM_SUBTREE, read_tree, write_files

# The same identity, no signing and no line-ending conversion on every machine.
CONFIG = [
    "-c", "user.name=vllm-fused-moe", "-c", "user.email=vllm-fused-moe@localhost",
    "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "advice.detachedHead=false",
]  # fmt: skip
# Electron's export flags: byte-stable mails that `git am` and `git apply --3way` take.
FORMAT_PATCH_FLAGS = ["--keep-subject", "--no-stat", "--no-signature", "--zero-commit", "--full-index"]
FIXED_DATE = "2000-01-01T00:00:00+0000"


@dataclass(frozen=True)
class GitResult:
    ok: bool
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def message(self) -> str:
        """What git said about a failure; some commands (`am`) say it on stdout."""
        return (self.err.strip() or self.out.strip())[-600:]


def git(
    *args: str,
    cwd: Path | None = None,
    check: bool = True,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    own_identity: bool = True,
) -> GitResult:
    """Run `git ARGS` in `cwd`; raise GitError unless it succeeded (or check is False).

    `own_identity=False` leaves the user's configuration alone: a contributor's clone signs
    off with the contributor's name, not ours.
    """
    argv = ["git", *(CONFIG if own_identity else []), *args]
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            input=stdin,
            capture_output=True,
            check=False,
            env={**os.environ, **env} if env else None,
            timeout=timeout,
        )
    except FileNotFoundError:
        raise ToolMissingError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"`git {_shown(args)}` did not answer within {timeout:.0f} s") from None
    result = GitResult(proc.returncode == 0, proc.stdout, proc.stderr)
    if check and not result.ok:
        where = f" in {cwd}" if cwd else ""
        raise GitError(f"`git {_shown(args)}` failed{where}: {result.message}")
    return result


def _shown(args: tuple[str, ...]) -> str:
    return " ".join(args[:6]) + (" …" if len(args) > 6 else "")


def read_blobs(repo: Path, object_ids: list[str]) -> dict[str, bytes]:
    """Many blobs in one `git cat-file --batch` (one process, not one per blob)."""
    if not object_ids:
        return {}
    result = git("cat-file", "--batch", cwd=repo, stdin="".join(f"{oid}\n" for oid in object_ids).encode())
    blobs: dict[str, bytes] = {}
    data, pos = result.stdout, 0
    for oid in object_ids:
        end = data.index(b"\n", pos)
        header = data[pos:end].decode()
        if header.endswith(" missing"):
            raise GitError(f"`git cat-file --batch` in {repo}: object {oid} is missing")
        _, kind, size_text = header.split(" ")
        size = int(size_text)
        if kind != "blob":
            raise GitError(f"`git cat-file --batch` in {repo}: {oid} is a {kind}, not a blob")
        blobs[oid] = data[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1  # the content is followed by one newline
    return blobs


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    kind: str
    oid: str
    path: str


def ls_tree(repo: Path, ref: str, prefix: str) -> list[TreeEntry]:
    """Every entry below `prefix` at `ref`, recursively (no checkout)."""
    listing = git("ls-tree", "-r", "-z", ref, "--", prefix.rstrip("/") + "/", cwd=repo).stdout
    entries = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        meta, path = raw.split(b"\t", 1)
        mode, kind, oid = meta.decode().split(" ")
        entries.append(TreeEntry(mode, kind, oid, path.decode("utf-8", "surrogateescape")))
    return entries


def files_at(repo: Path, ref: str, prefix: str) -> dict[str, bytes]:
    """The files below `prefix` at `ref`, keyed by their path relative to `prefix`."""
    entries = [e for e in ls_tree(repo, ref, prefix) if e.kind == "blob"]
    blobs = read_blobs(repo, [e.oid for e in entries])
    cut = len(prefix.rstrip("/")) + 1
    return {e.path[cut:]: blobs[e.oid] for e in entries}


def apply_ok(cwd: Path, *args: str) -> bool:
    """Does `git apply ARGS` succeed in `cwd`, a plain directory? (never with fuzz: no -C, no --recount)

    Inside someone else's work tree (a TMPDIR under a clone, as nox's `create_tmp()` sets it)
    git would take paths relative to that repository's top and skip every file outside `cwd`,
    succeeding without touching anything; the ceiling keeps git from looking above `cwd`.
    """
    ceiling = {"GIT_CEILING_DIRECTORIES": str(cwd.resolve().parent)}
    return git("apply", *args, cwd=cwd, check=False, env=ceiling).ok


def head_commit(root: Path) -> str:
    """HEAD of a checkout, or "" outside one."""
    result = git("rev-parse", "HEAD", cwd=root, check=False)
    return result.out.strip() if result.ok else ""


def commit_time(root: Path) -> int | None:
    """The commit time of HEAD (seconds since the epoch), or None outside a checkout."""
    result = git("log", "-1", "--format=%ct", cwd=root, check=False)
    text = result.out.strip()
    return int(text) if result.ok and text.isdigit() else None


def ls_remote_tags(url: str, timeout: float = 120) -> str:
    """The raw `git ls-remote --tags URL` text, peeled entries kept."""
    return git("ls-remote", "--tags", url, timeout=timeout).out


class WorkRepo:
    """A scratch repository laid out with upstream paths, where patches are applied."""

    def __init__(self, path: Path, root: str = UPSTREAM_SUBTREE) -> None:
        self.path = path
        # The upstream directory the files of the release line live in (the head's: prepare_finalize/).
        self.root = root

    def run(self, *args: str, check: bool = True, fixed_date: bool = False) -> GitResult:
        env = {"GIT_COMMITTER_DATE": FIXED_DATE, "GIT_AUTHOR_DATE": FIXED_DATE} if fixed_date else None
        return git(*args, cwd=self.path, check=check, env=env)

    @classmethod
    def create(cls, path: Path, root: str = UPSTREAM_SUBTREE) -> WorkRepo:
        path.mkdir(parents=True, exist_ok=True)
        repo = cls(path, root)
        repo.run("init", "--quiet", "--initial-branch=queue")
        return repo

    @property
    def subtree(self) -> Path:
        return self.path / self.root

    def commit_subtree(self, files: dict[str, bytes], message: str) -> str:
        """Make the subtree exactly `files` and commit it; returns the commit id."""
        if self.subtree.exists():
            shutil.rmtree(self.subtree)
        write_files(self.subtree, files)
        self.run("add", "--all", "--", self.root)
        self.run("commit", "--quiet", "--allow-empty", "-m", message, fixed_date=True)
        return self.head()

    def head(self) -> str:
        return self.run("rev-parse", "HEAD").out.strip()

    def apply_check(self, patch: Path, reverse: bool = False) -> GitResult:
        args = ["apply", "--check"] + (["--reverse"] if reverse else []) + [str(patch)]
        return self.run(*args, check=False)

    def am(self, patch: Path) -> GitResult:
        return self.run("am", "--3way", "--keep", "--keep-cr", "--quiet", str(patch), check=False)

    def am_in_progress(self) -> bool:
        return (self.path / ".git" / "rebase-apply").exists()

    def export(self, base: str, out: Path) -> list[Path]:
        out = out.resolve()  # format-patch -o resolves a relative path against the repo, not our cwd
        out.mkdir(parents=True, exist_ok=True)
        listing = self.run("format-patch", *FORMAT_PATCH_FLAGS, "-o", str(out), f"{base}..HEAD").out
        return [Path(line) for line in listing.splitlines() if line.strip()]

    def subtree_files(self) -> dict[str, bytes]:
        return read_tree(self.subtree)

    def subtree_files_at(self, ref: str) -> dict[str, bytes]:
        return files_at(self.path, ref, self.root)

    def unmerged_paths(self) -> list[str]:
        out = self.run("diff", "--name-only", "--diff-filter=U", check=False).out
        return [line for line in out.splitlines() if line]
