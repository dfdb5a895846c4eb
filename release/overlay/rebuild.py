"""Publish only what the checkout builds: every wheel is, byte for byte, the tool's own build for its tag.

A wheel names where it was built in its `_build_info.json` (`commit`, `dirty`, `source_date_epoch`) and
its tag and patch level in its file name (`vllm_fused_moe-X+fm.N`). `build` is reproducible, so that
build is made again and the two compared before any test runs:

- a wheel whose facts name a commit: that commit must be HEAD of this checkout or an ancestor of it; it is
  checked out beside (release/core/git.py `checkout_at`, which borrows the objects and writes nothing
  into the repository) and built there by that commit's own `python -m release build --tag X
  --patch-level N` (this checkout's tool where the commit holds none), once per commit and level for
  every tag of the wheels that name it;
- a dirty build (`--allow-dirty`, taken only with `publish --allow-dirty`), or a wheel built in a checkout
  that is no git repository (commit "") when this one is none either: the build of this checkout's tree
  as it is, the same command with `--allow-dirty`;
- anything else (no build facts, a commit that is not in this history, a version our build does not
  make) is refused, as is a wheel whose bytes differ, naming the first member that differs.

The rebuilt digests of a commit's build are kept under the cache (`<cache>/rebuilt/<key>.json`, the key
the commit, the tag, the level, the epoch and the builder's Python): a commit's files are fixed by its id,
the release it replays is pinned by sha256 in its train.toml and the backend by version in its code, so
the build is a function of the key; each entry is sealed (release/core/seal.py) and trusted only whole.
A working tree's build is never kept: the tree changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from packaging.utils import parse_wheel_filename

import release
from release.core.errors import BadWheelError, ReleaseError, UnprovenWheelError
from release.core.files import WHEEL_LIMIT, open_regular
from release.core.flags import ALLOW_DIRTY
from release.core.git import checkout_at, head_commit, in_history
from release.core.hashing import file_sha256, sha256_hex
from release.core.journal import write_atomic
from release.core.layout import Layout
from release.core.seal import sealed
from release.evidence.cache import cache_root, key_of, read_entry, trusted
from release.model.wheel import OverlayWheel

LEVEL_RE = re.compile(r"\+fm\.(\d+)(\.dirty)?$")
BUILD_TIMEOUT_S = 900  # a commit's whole `build --tag`: its train check replays every tag it is asked for
HINT = (
    "publish only wheels `python -m release build` made from a commit of this checkout's history (or, with "
    "--allow-dirty, from its tree as it is): nothing is trusted because the wheel says so; nothing was published"
)


@dataclass(frozen=True)
class Origin:
    """Where a wheel says it was built, as far as a rebuild needs it."""

    wheel: Path
    sha256: str  # the command's one read of it (release/overlay/wheel.py)
    tag: str  # from its file name
    level: int  # N of X+fm.N
    commit: str  # "" : this checkout's tree as it is
    epoch: int
    info: dict[str, Any] = field(compare=False, repr=False)

    @property
    def where(self) -> str:
        return f"commit {self.commit[:12]}" if self.commit else "this checkout's tree as it is"


def origin_of(layout: Layout, read: OverlayWheel, allow_dirty: bool) -> tuple[Origin | None, str]:
    """(the wheel's origin, "") or (None, why it cannot be a build of this checkout)."""
    wheel, info = read.path, read.build_info
    if info is None:
        return None, "it has no build facts (_build_info.json): it is no build of this checkout"
    version = parse_wheel_filename(wheel.name)[1]
    level = LEVEL_RE.search(str(version))
    commit, epoch, dirty = info.get("commit"), info.get("source_date_epoch"), info.get("dirty")
    if level is None:
        return None, f"its version {version} is not one `build` makes (X+fm.N)"
    if not isinstance(commit, str) or not isinstance(epoch, int) or not isinstance(dirty, list):
        return None, "its build facts name no commit, date or dirt (commit, source_date_epoch, dirty)"
    tag = f"v{version.public}"
    made = Origin(wheel, read.sha256, tag, int(level.group(1)), commit, epoch, info)
    if dirty or level.group(2):
        if not allow_dirty:
            return None, "it is a dirty build (publish --allow-dirty takes it, compared with this tree's build)"
        return Origin(wheel, read.sha256, tag, made.level, "", epoch, info), ""
    if not commit:
        if head_commit(layout.root):
            return None, "its build facts name no commit, and this checkout is a git repository"
        return made, ""
    if not in_history(layout.root, commit):
        return None, f"its build facts name commit {commit[:40]}, which is not in this checkout's history"
    return made, ""


@dataclass(frozen=True)
class Rebuilt:
    name: str
    sha256: str
    members: tuple[tuple[str, str], ...]  # (name, sha256) in archive order


def members(path: Path) -> tuple[tuple[str, str], ...]:
    with open_regular(path, WHEEL_LIMIT, error=BadWheelError) as handle, zipfile.ZipFile(handle) as archive:
        return tuple((i.filename, sha256_hex(archive.read(i))) for i in archive.infolist())


def first_difference(wheel: Path, rebuilt: Rebuilt) -> str:
    """The first member (in the rebuilt wheel's order) that differs, or what else differs."""
    try:
        ours = dict(members(wheel))
    except (zipfile.BadZipFile, OSError, ValueError, BadWheelError) as exc:
        return f"it is no readable zip ({exc})"
    for name, digest in rebuilt.members:
        if name not in ours:
            return f"{name} is missing"
        if ours[name] != digest:
            return f"{name} differs"
    extra = sorted(set(ours) - {name for name, _ in rebuilt.members})
    if extra:
        return f"{extra[0]} is not in the build"
    return "the zip archive itself differs (order, dates or headers of its members)"


class References:
    """The trees the wheels of one publish were built from: each commit's checkout (made when first asked,
    removed at the end) or this checkout; use as a context manager."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._stack = contextlib.ExitStack()
        self._trees: dict[str, Path] = {}

    def __enter__(self) -> References:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stack.close()

    def root(self, commit: str) -> Path:
        """The tree of `commit` ("": this checkout as it is)."""
        if not commit:
            return self.layout.root
        if commit not in self._trees:
            scratch = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="vllm-fused-moe-rebuild-")))
            checkout_at(self.layout.root, commit, scratch / "checkout")
            self._trees[commit] = scratch / "checkout"
        return self._trees[commit]

    def verify(self, origins: list[Origin]) -> None:
        """Refuse (UnprovenWheelError) every wheel that is not byte for byte the build of its origin."""
        problems: list[str] = []
        groups: dict[tuple[str, int, int], list[Origin]] = {}
        for made in origins:
            groups.setdefault((made.commit, made.level, made.epoch), []).append(made)
        for (commit, level, epoch), group in groups.items():
            found = {made.tag: self._cached(made) for made in group}
            wanted = sorted({tag for tag, rebuilt in found.items() if rebuilt is None})
            if wanted:
                built, problem = self._build(commit, level, epoch, wanted)
                if problem:
                    problems += [f"{made.wheel.name}: {problem}" for made in group if made.tag in wanted]
                found.update(built)
            for made in group:
                rebuilt = found.get(made.tag)
                if rebuilt is None:
                    continue  # its build failed: said above
                if rebuilt.name != made.wheel.name:
                    problems.append(f"{made.wheel.name}: the build of {made.tag} at {made.where} is {rebuilt.name}")
                elif rebuilt.sha256 != made.sha256:
                    problems.append(
                        f"{made.wheel.name} is not the build of {made.tag} at {made.where}: "
                        + first_difference(made.wheel, rebuilt)
                    )
        if problems:
            raise UnprovenWheelError(what="not publishing", problems=problems, hint=HINT)

    def _key(self, made: Origin) -> tuple[str, ...]:
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        return ("rebuilt", made.commit, made.tag, str(made.level), str(made.epoch), python)

    def _cached(self, made: Origin) -> Rebuilt | None:
        if not made.commit:
            return None
        key = key_of(*self._key(made))
        stored = read_entry(cache_root() / "rebuilt" / f"{key}.json")
        if stored is None or not trusted(stored, key):
            return None
        return Rebuilt(
            str(stored["wheel"]), str(stored["sha256"]), tuple((str(n), str(d)) for n, d in stored["members"])
        )

    def _keep(self, made: Origin, rebuilt: Rebuilt) -> None:
        inputs = self._key(made)
        key = key_of(*inputs)
        record: dict[str, Any] = {"key": key, "inputs": list(inputs), "wheel": rebuilt.name, "sha256": rebuilt.sha256}
        record["members"] = [list(m) for m in rebuilt.members]
        directory = cache_root() / "rebuilt"
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(
            directory / f"{key}.json", (json.dumps(sealed(cache_root(), record), sort_keys=True) + "\n").encode()
        )

    def _build(self, commit: str, level: int, epoch: int, tags: list[str]) -> tuple[dict[str, Rebuilt], str]:
        """({tag: its rebuilt wheel}, "") or ({}, why the build failed), by the tree's own `build`."""
        try:
            root = self.root(commit)
        except ReleaseError as exc:
            return {}, f"cannot check out {commit[:12]}: {exc}"
        # The commit's own tool builds its wheels; a tree that holds none (a copy of the queue) is built by ours.
        tool = root if (root / "release" / "__main__.py").is_file() else Path(release.__file__).resolve().parents[1]
        with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-rebuilt-") as out:
            command = [sys.executable, "-m", "release", "--root", str(root), "build", "--out", out]
            command += [arg for tag in tags for arg in ("--tag", tag)] + ["--patch-level", str(level)]
            command += [] if commit else [ALLOW_DIRTY]
            env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
            try:
                proc = subprocess.run(
                    command, cwd=tool, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return {}, f"the build of {', '.join(tags)} at {_where(commit)} did not run: {exc}"
            if proc.returncode != 0:
                said = [line for line in proc.stderr.splitlines() if line.startswith("error")][-1:] or ["no error line"]
                return (
                    {},
                    f"the build of {', '.join(tags)} at {_where(commit)} failed (exit {proc.returncode}): {said[0]}",
                )
            found: dict[str, Rebuilt] = {}
            for path in sorted(Path(out).glob("*.whl")):
                rebuilt = Rebuilt(path.name, file_sha256(path), members(path))
                tag = f"v{parse_wheel_filename(path.name)[1].public}"
                found[tag] = rebuilt
                if commit:
                    self._keep(Origin(path, rebuilt.sha256, tag, level, commit, epoch, {}), rebuilt)
        return found, ""


def _where(commit: str) -> str:
    return f"commit {commit[:12]}" if commit else "this checkout's tree"


def origins(layout: Layout, wheels: list[OverlayWheel], allow_dirty: bool) -> list[Origin]:
    """Each wheel's origin; refuses (UnprovenWheelError) every wheel that names none of this checkout."""
    problems, found = [], []
    for wheel in wheels:
        made, problem = origin_of(layout, wheel, allow_dirty)
        if made is None:
            problems.append(f"{wheel.name}: {problem}")
        else:
            found.append(made)
    if problems:
        raise UnprovenWheelError(what="not publishing", problems=problems, hint=HINT)
    return found
