"""A scratch git repository laid out with upstream paths, where patches are applied.

Every call is an explicit argv list. The identity and dates are fixed so results do
not depend on the machine's git configuration.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from release.errors import ToolMissingError
from release.layout import UPSTREAM_SUBTREE

IDENTITY = ["-c", "user.name=vllm-fused-moe", "-c", "user.email=vllm-fused-moe@localhost",
            "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "advice.detachedHead=false"]
# Electron's export flags: byte-stable mails that `git am` and `git apply --3way` take.
FORMAT_PATCH_FLAGS = ["--keep-subject", "--no-stat", "--no-signature", "--zero-commit", "--full-index"]
FIXED_DATE = "2000-01-01T00:00:00+0000"


@dataclass
class GitResult:
    ok: bool
    stdout: str
    stderr: str


class WorkRepo:
    def __init__(self, path: Path) -> None:
        self.path = path

    def run(self, *args: str, check: bool = True, env_date: bool = False) -> GitResult:
        env = None
        if env_date:
            import os

            env = {**os.environ, "GIT_COMMITTER_DATE": FIXED_DATE, "GIT_AUTHOR_DATE": FIXED_DATE}
        try:
            proc = subprocess.run(["git", *IDENTITY, *args], cwd=self.path, capture_output=True,
                                  text=True, check=False, env=env)
        except FileNotFoundError:
            raise ToolMissingError("git is not installed") from None
        result = GitResult(proc.returncode == 0, proc.stdout, proc.stderr)
        if check and not result.ok:
            raise RuntimeError(f"git {' '.join(args)} failed in {self.path}: {proc.stderr.strip()}")
        return result

    @classmethod
    def create(cls, path: Path) -> "WorkRepo":
        path.mkdir(parents=True, exist_ok=True)
        repo = cls(path)
        repo.run("init", "--quiet", "--initial-branch=queue")
        return repo

    @property
    def subtree(self) -> Path:
        return self.path / UPSTREAM_SUBTREE

    def commit_subtree(self, files: dict[str, bytes], message: str) -> str:
        """Make the subtree exactly `files` and commit it; returns the commit id."""
        if self.subtree.exists():
            shutil.rmtree(self.subtree)
        write_files(self.subtree, files)
        self.run("add", "--all", "--", UPSTREAM_SUBTREE)
        self.run("commit", "--quiet", "--allow-empty", "-m", message, env_date=True)
        return self.head()

    def head(self) -> str:
        return self.run("rev-parse", "HEAD").stdout.strip()

    def apply_check(self, patch: Path, reverse: bool = False) -> GitResult:
        # No --recount, no -C: git apply never fuzzes, and we never ask it to.
        args = ["apply", "--check"] + (["--reverse"] if reverse else []) + [str(patch)]
        return self.run(*args, check=False)

    def am(self, patch: Path) -> GitResult:
        return self.run("am", "--3way", "--keep", "--keep-cr", "--quiet", str(patch), check=False)

    def am_in_progress(self) -> bool:
        return (self.path / ".git" / "rebase-apply").exists()

    def export(self, base: str, out: Path) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        listing = self.run("format-patch", *FORMAT_PATCH_FLAGS, "-o", str(out), f"{base}..HEAD").stdout
        return [Path(line) for line in listing.splitlines() if line.strip()]

    def subtree_files(self) -> dict[str, bytes]:
        from release.layout import read_tree

        return read_tree(self.subtree)

    def subtree_files_at(self, ref: str) -> dict[str, bytes]:
        listing = self.run("ls-tree", "-r", "--name-only", ref, "--", UPSTREAM_SUBTREE + "/").stdout.split()
        prefix = len(UPSTREAM_SUBTREE) + 1
        files = {}
        for path in listing:
            shown = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=self.path, capture_output=True, check=True)
            files[path[prefix:]] = shown.stdout
        return files

    def unmerged_paths(self) -> list[str]:
        out = self.run("diff", "--name-only", "--diff-filter=U", check=False).stdout
        return [line for line in out.splitlines() if line]


def write_files(directory: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
