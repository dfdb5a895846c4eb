"""A tag's replay, kept by the digest of everything it is made of, so an unchanged series is replayed once.

A replay (release/train/replay.py `replay_tag`: pristine(tag) + the series, patch by patch, in a scratch
git repository) is a pure function of its inputs. The key is the sha256 of every one of them:
- the tag and the upstream directory its files are keyed below (the line's root);
- the pristine tree, every file's name and bytes (by its sha256);
- the tree the series was made on (whose blobs `--3way` finds, or none), every file's name and bytes;
- the patches remembered on that tree and the patches replayed, in order, each its name and whole text;
- the tool itself: every Python file of `release/` (but the overlay's runtime/, which no replay runs), so a
  change to how a series is applied, classified or merged is a new key;
- git: its `git version` (the merge is git's), and the configuration every git we run is given is in
  release/core/git.py, which the tool's digest covers.
What a replay reads besides these is nothing: git runs isolated from the machine (release/core/git.py)
in a scratch repository made from these bytes alone. So a stored result under the key IS the result
the replay would compute now, and `train check` proves a tag reproduces by a hit as well as by a replay:
the hashes it compares are computed from the stored files, which must hash as stored.

Stored: `<cache>/replays/<key>.json` (beside the wheel cache; `VLLM_FUSED_MOE_CACHE` moves both), the
patched files and each patch's outcome, only for a replay without a conflict (a conflict is described
from the scratch repository it stopped in, so it is computed every time). Two processes after one key
wait for each other (a lock file beside it), so a replay is computed once. An entry that cannot be read
back whole (damaged, another format, a file that does not hash as recorded) is computed again.
"""

from __future__ import annotations

import base64
import functools
import json
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from release.core.errors import BadInputError
from release.core.git import WorkRepo, git_version
from release.core.hashing import code_digest, sha256_hex
from release.core.journal import write_atomic
from release.core.parse import load_json
from release.model.outcome import PatchOutcome, PatchStatus
from release.model.patch import Patch
from release.model.tree import UpstreamTree
from release.pristine.wheel import cache_dir
from release.queue.replay import Replay, replay_series, start

FORMAT = 1
# One replay is a few git processes; a lock held longer than this is a replay that hangs.
LOCK_TIMEOUT_S = 600.0
TOOL = Path(__file__).resolve().parents[1]  # release/
NOT_REPLAYED = ("overlay/runtime",)  # the wheel's own code: no replay runs it


@dataclass(frozen=True)
class Replayed:
    """What a replay gives: the patched subtree and each patch's outcome, in series order."""

    files: dict[str, bytes]
    outcomes: list[PatchOutcome]
    unmerged: tuple[str, ...] = ()  # where a conflict stopped it: the paths git left unmerged (never kept)

    @property
    def conflict(self) -> PatchOutcome | None:
        return next((o for o in self.outcomes if o.status == PatchStatus.CONFLICT), None)


def replays_dir() -> Path:
    return cache_dir().parent / "replays"


@functools.cache
def tool_digest() -> str:
    """The digest of every Python file of the tool, read once per process."""
    files = [
        path
        for path in TOOL.rglob("*.py")
        if not path.relative_to(TOOL).as_posix().startswith(NOT_REPLAYED) and "__pycache__" not in path.parts
    ]
    return code_digest(TOOL, files)


def _tree_digest(files: dict[str, bytes] | None) -> str:
    if files is None:
        return "none"
    return sha256_hex("".join(f"{name}\0{sha256_hex(data)}\n" for name, data in sorted(files.items())).encode())


def _patches_digest(patches: Iterable[Patch]) -> str:
    return sha256_hex("".join(f"{p.name}\0{sha256_hex(p.text.encode('utf-8'))}\n" for p in patches).encode())


def replay_key(
    tag: str,
    root: str,
    pristine: dict[str, bytes],
    made_on: dict[str, bytes] | None,
    remembered: list[Patch],
    patches: list[Patch],
) -> str:
    """The digest of every input of one replay (the module's docstring names them and says why that is all)."""
    inputs = [
        f"format {FORMAT}",
        f"tag {tag}",
        f"root {root}",
        f"pristine {_tree_digest(pristine)}",
        f"made-on {_tree_digest(made_on)}",
        f"remembered {_patches_digest(remembered) if made_on is not None else 'none'}",
        f"replayed {_patches_digest(patches)}",
        f"tool {tool_digest()}",
        f"git {git_version()}",
    ]
    return sha256_hex("\n".join(inputs).encode())


def replay_tree(
    upstream: UpstreamTree,
    root: str,
    made_on: dict[str, bytes] | None,
    remembered: list[Patch],
    patches: list[Patch],
) -> Replayed:
    """`upstream`'s tree + `patches`, classified patch by patch in a scratch repository that first holds
    `made_on` with `remembered` applied on it (release/queue/replay.py `start`), kept by its inputs: what
    `train check`, `build --all`, `train add` and `pq carry` replay on a train tag."""

    def compute() -> Replayed:
        with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-replay-") as tmp:
            work = Path(tmp)
            repo = WorkRepo.create(work / "repo", root)
            start(repo, work, upstream.files, f"vllm {upstream.tag} (pristine)", made_on, remembered)
            done = Replay()
            stopped = replay_series(repo, work, patches, done, upstream)
            unmerged = tuple(repo.unmerged_paths()) if stopped is not None else ()
            return Replayed(repo.subtree_files(), done.outcomes, unmerged)

    return cached_replay(replay_key(upstream.tag, root, upstream.files, made_on, remembered, patches), compute)


def cached_replay(key: str, compute: Callable[[], Replayed]) -> Replayed:
    """The stored replay for `key`, or `compute()`'s, stored when it has no conflict."""
    directory = replays_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{key}.json"
    with FileLock(str(directory / f"{key}.lock"), timeout=LOCK_TIMEOUT_S):
        stored = read_entry(path, key)
        if stored is not None:
            return stored
        result = compute()
        if result.conflict is None:
            write_atomic(path, dumps(key, result).encode("utf-8"))
        return result


def dumps(key: str, replayed: Replayed) -> str:
    files = {
        name: {"sha256": sha256_hex(data), "base64": base64.b64encode(data).decode("ascii")}
        for name, data in sorted(replayed.files.items())
    }
    outcomes = [
        {"name": o.name, "subject": o.subject, "status": o.status.value, "how": o.how} for o in replayed.outcomes
    ]
    return json.dumps({"format": FORMAT, "key": key, "files": files, "outcomes": outcomes}, sort_keys=True) + "\n"


def read_entry(path: Path, key: str) -> Replayed | None:
    """The entry at `path` if it is whole and is `key`'s; None otherwise (absent, damaged, another format)."""
    if not path.is_file():
        return None
    try:
        data = load_json(path)
        if data["format"] != FORMAT or data["key"] != key:
            return None
        files = {}
        for name, held in data["files"].items():
            raw = base64.b64decode(held["base64"], validate=True)
            if sha256_hex(raw) != held["sha256"]:
                return None
            files[name] = raw
        outcomes = [PatchOutcome(o["name"], o["subject"], PatchStatus(o["status"]), o["how"]) for o in data["outcomes"]]
    except (BadInputError, KeyError, TypeError, ValueError, AttributeError):
        return None
    return Replayed(files, outcomes)
