"""Is a patch's change already upstream? The semantic check (post-image there, pre-image gone)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE
from release.model.outcome import PatchStatus
from release.model.patch import Hunk, Patch

# ----------------------------------------------------------- already upstream?


def _normalise(lines: list[str]) -> list[str]:
    # Our backports may add a comment upstream did not; code, not comments, decides.
    out = []
    for line in lines:
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            out.append(stripped)
    return out


def _core(hunk: Hunk) -> tuple[list[str], list[str]]:
    """The changed lines of a hunk with one line of real code on each side."""
    lines = list(hunk.lines)
    changed = [i for i, line in enumerate(lines) if line[:1] in "+-"]
    if not changed:
        return [], []
    first, last = changed[0], changed[-1]
    before = [line[1:] for line in lines[:first] if line.startswith(" ")]
    after = [line[1:] for line in lines[last + 1 :] if line.startswith(" ")]
    lead = _normalise(before)[-1:]
    tail = _normalise(after)[:1]
    middle = lines[first : last + 1]
    pre = lead + _normalise([line[1:] for line in middle if line[:1] in " -"]) + tail
    post = lead + _normalise([line[1:] for line in middle if line[:1] in " +"]) + tail
    return pre, post


def _contains(haystack: list[str], needle: list[str]) -> bool:
    if not needle:
        return False
    width = len(needle)
    return any(haystack[i : i + width] == needle for i in range(len(haystack) - width + 1))


def effect_present(patch: Patch, files: dict[str, bytes], root: str = UPSTREAM_SUBTREE) -> bool:
    """The semantic check: every hunk's post-image is in `files` (keyed below `root`) and its pre-image is gone."""
    for hunk in patch.hunks:
        data = files.get(hunk.path[len(root) + 1 :])
        if data is None:
            return False
        text = _normalise(data.decode("utf-8", "replace").splitlines())
        pre, post = _core(hunk)
        if pre == post or not _contains(text, post) or _contains(text, pre):
            return False
    return True


def hunk_label(hunk: Hunk) -> str:
    match = re.match(r"(@@ [^@]+ @@)", hunk.header)
    return match.group(1) if match else hunk.header


# ------------------------------------------------------------ one classifier


@dataclass(frozen=True)
class Classification:
    status: PatchStatus  # APPLIES, UPSTREAM or CONFLICT
    how: str


def classify(repo: WorkRepo, patch: Patch, mails: Path) -> Classification:
    """Is `patch` applicable, already upstream, or in conflict on the tree at `repo`'s HEAD?

    The one decision `rebase`, `scan` and `pq carry` share; git reads the patch from its mail,
    written into the directory `mails` (made if missing) under its own name. An applicable patch
    is committed with `git am --3way` (so the next patch sees it); on a conflict the `am` is left
    in progress for the caller to describe (rebase, pq carry) or abort (scan).
    """
    mails.mkdir(parents=True, exist_ok=True)
    patch_file = mails / patch.name
    patch_file.write_text(patch.text, encoding="utf-8")
    if repo.apply_check(patch_file).ok:
        how = "applies as it is"
    elif repo.apply_check(patch_file, reverse=True).ok:
        return Classification(PatchStatus.UPSTREAM, "reverse-applies cleanly: already upstream")
    elif effect_present(patch, repo.subtree_files(), repo.root):
        return Classification(PatchStatus.UPSTREAM, "its change is present and its pre-image gone (semantic check)")
    else:
        how = "3-way merge"
    if not repo.am(patch_file).ok:
        return Classification(PatchStatus.CONFLICT, "neither applies nor 3-way merges cleanly")
    return Classification(PatchStatus.APPLIES, how)
