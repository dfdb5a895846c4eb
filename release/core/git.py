"""Every git call of the tooling, and nothing else (after Electron's `script/lib/git.py`).

One runner, `git()`: an explicit argument list, never a shell, and one way to fail:
`GitError`, which carries the command and git's own message. Callers that expect a failure
as an answer (does this patch apply?) pass `check=False` and read `ok`.

The maintainer's machine is not ours, so no git we run reads it (docs/guarantees.md, "The
maintainer's machine"):
- no configuration file but the repository's own: `GIT_CONFIG_GLOBAL` is os.devnull (or a
  file holding only the user's `safe.directory` entries, see `_global_config`),
  `GIT_CONFIG_NOSYSTEM`, `GIT_ATTR_NOSYSTEM`, no templates for `git init`;
- no `GIT_*` variable of the caller's (they relocate the repository, the index or the
  objects, inject configuration, set identities and dates, swap the diff program), no
  `EMAIL`, and English messages (`LC_ALL=C`: some callers read git's words);
- `PINNED` on every command line: no hooks, no attributes or excludes file from HOME, and
  the settings whose value shapes our bytes, at git's stock values. The command line outranks
  every configuration file, the repository's own included, so they hold in a repository we
  did not create too (a contributor's vLLM clone in `upstream-pr`, the maintainer's checkout
  that `build` reads). Its other local settings (a filter driver, `.git/info/attributes`)
  still apply there: git has no switch to skip a repository's own configuration.

Commits in our scratch repositories carry `OURS`; a commit in a contributor's clone carries
the identity git would give it there, read once by `user_identity` (the only call that sees
the user's configuration) and passed explicitly like everything else.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from release.core import log
from release.core.errors import GitError, ToolMissingError
from release.core.layout import UPSTREAM_SUBTREE, read_tree, write_files

# GIT_CONFIG_GLOBAL (the switch that keeps ~/.gitconfig out) came in git 2.32; an older git
# would silently read the user's configuration again.
MINIMUM_GIT = (2, 32)

# What every git we run is told, whatever any configuration file says. Values are git's
# stock ones (the bytes an unconfigured git makes: renames detected, myers, a/ and b/),
# so a patch made by a contributor's plain `git format-patch` round-trips unchanged.
# Keys an older git does not know (format.noprefix, diff.srcPrefix) are ignored by it.
PINNED = {
    # nothing of the machine's runs or is read
    "core.hooksPath": os.devnull,
    "core.attributesFile": os.devnull,
    "core.excludesFile": os.devnull,
    "core.fsmonitor": "false",
    "core.useReplaceRefs": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
    # content in and out as bytes
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "core.quotePath": "true",
    "core.commentChar": "#",
    "i18n.commitEncoding": "UTF-8",
    "i18n.logOutputEncoding": "UTF-8",
    "color.ui": "false",
    "log.showSignature": "false",
    # the diff of every exported patch
    "diff.noprefix": "false",
    "diff.mnemonicPrefix": "false",
    "diff.srcPrefix": "a/",
    "diff.dstPrefix": "b/",
    "diff.algorithm": "myers",
    "diff.renames": "true",
    "diff.indentHeuristic": "true",
    "diff.suppressBlankEmpty": "false",
    "diff.context": "3",
    "diff.interHunkContext": "0",
    "diff.relative": "false",
    # the mail around it
    "format.signOff": "false",
    "format.noprefix": "false",
    "format.suffix": ".patch",
    "format.useAutoBase": "false",
    "format.coverLetter": "false",
    "format.thread": "false",
    "format.notes": "false",
    # taking a mail: am, apply, the merge of `am --3way`, the sign-off
    "am.keepCR": "false",
    "am.threeWay": "false",
    "am.messageId": "false",
    "mailinfo.scissors": "false",
    "apply.whitespace": "warn",
    "apply.ignoreWhitespace": "no",
    "merge.conflictStyle": "merge",
    "merge.renames": "true",
    "trailer.separators": ":",
    # signing needs the user's keys and agent, and would change the commit
    "commit.gpgSign": "false",
    "tag.gpgSign": "false",
    "advice.detachedHead": "false",
}
# The few variables of the caller's that only say how to reach a remote (ssh), never what
# git does with what it fetched.
KEPT_GIT_VARIABLES = frozenset({"GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS"})
# Where a repository, its index and its objects are: scrubbed even when reading the user's
# identity, which must come from the repository at `cwd`.
LOCATING_VARIABLES = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    }
)
# Electron's export flags: byte-stable mails that `git am` and `git apply --3way` take.
FORMAT_PATCH_FLAGS = ["--keep-subject", "--no-stat", "--no-signature", "--zero-commit", "--full-index"]
FIXED_DATE = "2000-01-01T00:00:00+0000"


@dataclass(frozen=True)
class Identity:
    """Who a commit (and a reflog entry, and a Signed-off-by line) names."""

    name: str
    email: str

    def config(self) -> list[str]:
        # committer.* and author.* outrank user.* whatever their scope, so all three are set.
        pairs = [(f"{who}.{key}", value) for who in ("user", "committer", "author")
                 for key, value in (("name", self.name), ("email", self.email))]  # fmt: skip
        return [arg for key, value in pairs for arg in ("-c", f"{key}={value}")]


OURS = Identity("vllm-fused-moe", "vllm-fused-moe@localhost")


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
    identity: Identity = OURS,
) -> GitResult:
    """Run `git ARGS` in `cwd`, isolated from the machine; raise GitError unless it succeeded.

    `env` adds our own variables (dates, a scratch index) after the caller's were scrubbed;
    `identity` is whom a commit names (a contributor's, from `user_identity`, in their clone).
    """
    _require_git()
    argv = ["git", *_pinned_config(), *identity.config(), *args]
    log.debug(f"git {_shown(args)}" + (f"  (in {cwd})" if cwd else ""))
    proc = _run(argv, args, cwd, stdin, {**isolated_environment(), **(env or {})}, timeout)
    result = GitResult(proc.returncode == 0, proc.stdout, proc.stderr)
    if check and not result.ok:
        where = f" in {cwd}" if cwd else ""
        raise GitError(f"`git {_shown(args)}` failed{where}: {result.message}")
    return result


def _run(
    argv: list[str],
    args: tuple[str, ...],
    cwd: Path | None,
    stdin: bytes | None,
    env: dict[str, str],
    timeout: float | None,
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, check=False, env=env, timeout=timeout)
    except FileNotFoundError as exc:
        # The same exception for a working directory that vanished (a scratch dir removed under us) as for
        # a missing program: saying "git is not installed" there sent people to reinstall git.
        if cwd is not None and exc.filename is not None and Path(exc.filename) == Path(cwd):
            raise GitError(f"`git {_shown(args)}` cannot run in {cwd}: the directory is gone") from None
        raise ToolMissingError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"`git {_shown(args)}` did not answer within {timeout:.0f} s") from None


def isolated_environment() -> dict[str, str]:
    """The caller's environment without what changes git's behaviour, and the switches that isolate it."""
    kept = {
        key: value
        for key, value in os.environ.items()
        if (not key.startswith("GIT_") or key in KEPT_GIT_VARIABLES) and key != "EMAIL"
    }
    return {
        **kept,
        "GIT_CONFIG_GLOBAL": _global_config(),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_TEMPLATE_DIR": "",  # empty: `git init` copies no hooks, no info/exclude
        "GIT_TERMINAL_PROMPT": "0",  # a source that asks for a password fails instead of waiting
        "LC_ALL": "C",
    }


@functools.cache
def _pinned_config() -> tuple[str, ...]:
    return tuple(arg for key, value in PINNED.items() for arg in ("-c", f"{key}={value}"))


@functools.cache
def _version() -> tuple[int, str]:
    """`git version`: its exit status and its answer (once per process)."""
    proc = _run(["git", "version"], ("version",), None, None, _user_environment(), 30)
    return proc.returncode, proc.stdout.decode("utf-8", "replace").strip()


def git_version() -> str:
    """What `git version` says (`git version 2.39.5`), for a cache whose result is git's to compute."""
    _require_git()
    return _version()[1]


@functools.cache
def _require_git() -> None:
    """Refuse a git too old to be isolated (once per process)."""
    code, said = _version()
    found = re.search(r"(\d+)\.(\d+)", said)
    if code != 0 or not found or (int(found[1]), int(found[2])) < MINIMUM_GIT:
        shown = said or "no version"
        raise ToolMissingError(
            f"git {'.'.join(map(str, MINIMUM_GIT))} or newer is needed ({shown}): an older git "
            "cannot be kept from reading your ~/.gitconfig, which changes the patches we write",
            hint="install a newer git (any release since June 2021)",
        )


def _user_environment() -> dict[str, str]:
    """The caller's environment, only unbound from any repository it named."""
    return {key: value for key, value in os.environ.items() if key not in LOCATING_VARIABLES}


@functools.cache
def _global_config() -> str:
    """os.devnull, or a file holding nothing but the user's own `safe.directory` entries.

    git refuses a repository another user owns unless the system or global configuration
    names it in `safe.directory` (the command line does not count before git 2.45): a
    maintainer in a container who configured that would otherwise find their checkout
    refused. This is the one setting carried over; it changes whether git opens a
    repository, never what it writes.
    """
    entries: list[str] = []
    for scope in ("--system", "--global"):
        proc = _run(["git", "config", scope, "--get-all", "safe.directory"], ("config",), None, None,
                    _user_environment(), 30)  # fmt: skip
        if proc.returncode == 0:
            # An empty entry is kept: it resets the list, as it does in the user's own files.
            entries += proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if not entries:
        return os.devnull
    directory = tempfile.mkdtemp(prefix="vllm-fused-moe-gitconfig-")
    atexit.register(shutil.rmtree, directory, True)
    path = Path(directory) / "config"
    quoted = (entry.replace("\\", "\\\\").replace('"', '\\"') for entry in entries)
    path.write_text("[safe]\n" + "".join(f'\tdirectory = "{entry}"\n' for entry in quoted), encoding="utf-8")
    return str(path)


IDENT_RE = re.compile(r"^(?P<name>.*) <(?P<email>[^<>]*)> \d+ [+-]\d{4}$")


def user_identity(repo: Path) -> Identity | None:
    """The committer identity git would use in `repo` by the user's own settings; None if it has none.

    The one git call that reads the user's configuration (and GIT_COMMITTER_*, EMAIL): a
    contributor signs off their own commit. Only the name and the email are taken from it.
    """
    _require_git()
    proc = _run(["git", "var", "GIT_COMMITTER_IDENT"], ("var",), repo, None, _user_environment(), 30)
    match = IDENT_RE.match(proc.stdout.decode("utf-8", "surrogateescape").strip())
    if proc.returncode != 0 or not match or not match["name"].strip() or not match["email"].strip():
        return None
    return Identity(match["name"], match["email"])


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


COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


def in_history(root: Path, commit: str) -> bool:
    """Whether `commit` (40 hex digits) is HEAD of the checkout at `root` or one of its ancestors."""
    if not COMMIT_RE.match(commit):
        return False
    return git("merge-base", "--is-ancestor", commit, "HEAD", cwd=root, check=False).ok


def checkout_at(root: Path, commit: str, target: Path) -> None:
    """A checkout of `commit` of the repository at `root` in `target` (a new directory), its objects borrowed
    (`clone --shared`): the repository itself is not written, and the copy is a git checkout whose HEAD is
    `commit`, as the tree a build at that commit ran in."""
    git("clone", "-q", "--shared", "--no-checkout", "--", str(root), str(target))
    git("checkout", "-q", "--detach", commit, cwd=target)


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
