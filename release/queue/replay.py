"""A series applied, undone and replayed: the one module that runs a series over git (release/core/git.py).

- `apply_series`: pristine + the series by `git apply`, no fuzz (what `pq export` checks vendor/ becomes,
  what `pq carry` replays on the head).
- `unapply`: the series reversed, last patch first, file by file where one is blocked (how `check`, `scan`
  and train's replay recover the pristine tree from vendor/).
- `replay_series`: the series replayed on another tag's pristine subtree, patch by patch: the classifier
  rebase, train and scan share (train/replay.py builds a train tag's patched tree with it).

Each patch, in series order, is classified on the tree as the patches before it left it:
it applies as it is (`git apply --check`), or is already upstream (it reverse-applies, or
its effect is present by the semantic check), or else it goes through `git am --3way`,
which either merges cleanly or is a conflict. Never fuzz: git takes no -C and no
--recount here.

A replay is a git history, not a loose apply: `start` first commits the tree the series was
made on (the head's pinned pristine tree, or a line's newest train tag) and applies the series
there too, so the object store holds every blob the series produces on it. Each patch's `index`
line names its pre-image on that tree (for a second patch on a file, the file as the first left
it), and `git am --3way` on another tag finds that base wherever git would.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from release.core.errors import ReleaseError
from release.core.faults import fault_point
from release.core.git import WorkRepo, apply_ok
from release.core.layout import UPSTREAM_SUBTREE, read_tree, write_files
from release.model.outcome import Conflict, PatchOutcome, PatchStatus
from release.model.patch import Patch
from release.model.tree import UpstreamTree
from release.queue.upstreamed import classify, hunk_label


def apply_series(pristine: dict[str, bytes], patches: list[Patch], error: type[ReleaseError]) -> dict[str, bytes]:
    """pristine + the series by `git apply`, no fuzz: what vendor/ becomes, made the way `unapply` undoes it.

    A patch that does not apply after the patches before it raises `error`, naming it."""
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-apply-") as tmp:
        root = Path(tmp) / "tree"
        write_files(root / UPSTREAM_SUBTREE, pristine)
        for patch in patches:
            file = Path(tmp) / patch.name
            file.write_text(patch.text, encoding="utf-8")
            if not apply_ok(root, "--check", str(file)) or not apply_ok(root, str(file)):
                raise error(f"{patch.name} does not apply after the patches before it")
        return read_tree(root / UPSTREAM_SUBTREE)


def unapply(files: dict[str, bytes], patches: list[Patch]) -> tuple[dict[str, bytes], dict[str, str]]:
    """Reverse the series (last patch first) on a copy of `files`.

    Returns the recovered files and, for each file a patch could not be reversed on,
    the name of that patch: those files were edited by hand (or the patch was).
    """
    blocked: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-undo-") as tmp:
        root = Path(tmp)
        write_files(root / UPSTREAM_SUBTREE, files)
        for patch in reversed(patches):
            patch_file = root / ".patch"
            patch_file.write_text(patch.text, encoding="utf-8")
            if apply_ok(root, "--reverse", "--check", str(patch_file)):
                apply_ok(root, "--reverse", str(patch_file))
                continue
            # Undo file by file, so one edited file does not hide the state of the others.
            for path in patch.files:
                only = [f"--include={path}", "--reverse", str(patch_file)]
                if apply_ok(root, *only[:-1], "--check", only[-1]):
                    apply_ok(root, *only)
                else:
                    blocked.setdefault(path[len(UPSTREAM_SUBTREE) + 1 :], patch.name)
        recovered = read_tree(root / UPSTREAM_SUBTREE)
    return recovered, blocked


def start(
    repo: WorkRepo,
    work: Path,
    upstream: dict[str, bytes],
    message: str,
    made_on: dict[str, bytes] | None = None,
    series: list[Patch] | None = None,
) -> str:
    """Commit the tag's pristine tree `upstream` as the base of a replay; returns its commit.

    `made_on` (with `series`, the patches made on it) goes in first: see `remember`.
    """
    if made_on:
        remember(repo, work, made_on, series or [])
    return repo.commit_subtree(upstream, message)


def remember(repo: WorkRepo, work: Path, made_on: dict[str, bytes], series: list[Patch]) -> str:
    """Commit `made_on`, then write into the object store every blob `series` produces on it.

    Each patch goes through `git apply --cached` onto the index the patches before it left, which
    writes its post-image blobs; one that does not apply there (a retired patch, a variant of
    another line) adds nothing and the next goes on. The index is then put back to the commit, so
    nothing but the objects remains. Returns the commit of `made_on`.
    """
    commit = repo.commit_subtree(made_on, "the tree the series was made on: its blobs for --3way")
    mails = work / "remembered"
    mails.mkdir(parents=True, exist_ok=True)
    for patch in series:
        mail = mails / patch.name
        mail.write_text(patch.text, encoding="utf-8")
        repo.run("apply", "--cached", str(mail), check=False)
    repo.run("reset", "--quiet", check=False)
    return commit


@dataclass
class Replay:
    """What replaying the series produced so far; saved to the work dir on a conflict."""

    outcomes: list[PatchOutcome] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  # names, in the order of their commits
    retired: list[str] = field(default_factory=list)


def replay_series(
    repo: WorkRepo, work: Path, patches: list[Patch], replay: Replay, upstream: UpstreamTree
) -> Patch | None:
    """Classify each patch in order; returns the patch that conflicts, if any."""
    for patch in patches:
        decided = classify(repo, patch, work / "patches")
        if decided.status == PatchStatus.UPSTREAM:
            replay.retired.append(patch.name)
            replay.outcomes.append(PatchOutcome(patch.name, patch.subject, PatchStatus.UPSTREAM, decided.how))
            continue
        if decided.status == PatchStatus.CONFLICT:
            absent = absent_files(patch, upstream)
            how = f"its file(s) are absent in vLLM {upstream.tag}: {', '.join(absent)}" if absent else decided.how
            conflicts = describe_conflict(repo, patch, upstream)
            replay.outcomes.append(
                PatchOutcome(patch.name, patch.subject, PatchStatus.CONFLICT, how, conflicts=conflicts)
            )
            return patch
        fault_point("rebase:replayed")
        replay.applied.append(patch.name)
        replay.outcomes.append(PatchOutcome(patch.name, patch.subject, PatchStatus.APPLIES, decided.how))
    return None


def absent_files(patch: Patch, upstream: UpstreamTree) -> list[str]:
    """The files the patch changes (not creates) that the new tag no longer has."""
    cut = len(UPSTREAM_SUBTREE) + 1
    created = {h.path for h in patch.hunks if h.header.startswith("@@ -0,0 ")}
    return [p for p in patch.files if p not in created and p[cut:] not in upstream.files]


def describe_conflict(repo: WorkRepo, patch: Patch, upstream: UpstreamTree) -> list[Conflict]:
    conflicts: list[Conflict] = []
    unmerged = repo.unmerged_paths()
    absent = set(absent_files(patch, upstream))
    paths = unmerged or list(patch.files)
    for path in dict.fromkeys([*paths, *sorted(absent)]):
        hunks = [hunk_label(h) for h in patch.hunks if h.path == path]
        if path in absent:
            theirs = "\n".join("\n".join(h.lines) for h in patch.hunks if h.path == path)
            ours = f"(absent in vLLM {upstream.tag}: the new tag deleted or moved this file)"
            conflicts.append(Conflict(path, hunks, ours, theirs))
            continue
        ours, theirs = _conflict_sides(repo.path / path)
        if not unmerged:
            theirs = "\n".join("\n".join(h.lines) for h in patch.hunks if h.path == path)
            ours = "(the pre-image blob of this patch is unknown here, so no 3-way merge was possible)"
        conflicts.append(Conflict(path, hunks, ours, theirs))
    return conflicts


def _conflict_sides(path: Path) -> tuple[str, str]:
    if not path.is_file():
        return "(file deleted upstream)", ""
    ours: list[str] = []
    theirs: list[str] = []
    side: list[str] | None = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("<<<<<<<"):
            side = ours
        elif line.startswith("=======") and side is ours:
            side = theirs
        elif line.startswith(">>>>>>>"):
            side = None
            ours.append("...")
            theirs.append("...")
        elif side is not None:
            side.append(line)
    return "\n".join(ours), "\n".join(theirs)
