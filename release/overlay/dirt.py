"""What `build` refuses before anything is built: an --out it cannot write, a part of the wheel that is
missing, a link, and a tree that is not its commit and pin (unless --allow-dirty, which the version says)."""

from __future__ import annotations

import os
from pathlib import Path

from release.core.errors import BadInputError, DirtyTreeError, OutputNotWritableError
from release.core.git import git
from release.core.layout import BESIDE_SUBTREE, writable_dir_problem
from release.overlay.project import CLI_MODULE, PTH_MODULE
from release.overlay.target import BuildPlan
from release.queue.snapshot import Checkout


def checked_inputs(plan: BuildPlan, checkout: Checkout) -> list[str]:
    """Refuse a dirty tree (unless --allow-dirty) before anything is built (after refuse_unwritable_or_missing).

    Returns what is dirty (empty for a clean tree); the version and build info say so.
    """
    dirty = dirty_reasons(checkout)
    if dirty and not plan.allow_dirty:
        shown = "; ".join(dirty[:5]) + (f"; and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        # The commonest dirt after a first build: the patch levels it recorded (docs/maintainers.md, step 4).
        levels = dirty == [f"{plan.layout.train.relative_to(plan.layout.root).as_posix()} (changed)"]
        hint = (
            "a build recorded new patch levels there: commit patches/train.toml, then build again" if levels else None
        )
        raise DirtyTreeError(f"the tree is not what its commit and pin say: {shown}", hint)
    return dirty


def refuse_unwritable_or_missing(plan: BuildPlan) -> None:
    problem = writable_dir_problem(plan.out)
    if problem:
        raise OutputNotWritableError(f"--out {plan.out}: {problem}; nothing was built")
    runtime = (*(plan.layout.runtime / f"{m}.py" for m in (PTH_MODULE, CLI_MODULE)), plan.layout.runtime_package)
    parts = (*runtime, *(plan.layout.vendored / name for name in BESIDE_SUBTREE))
    missing = [part for part in parts if not part.exists()]
    if missing:
        raise BadInputError(
            f"{missing[0]} is missing; the wheel is made of release/overlay/runtime/ (ours) and "
            "vendor/vllm_fused_moe/ (upstream's files and their pins); nothing was built",
            hint="restore it from git (`git checkout -- PATH`); --root must name a whole checkout",
        )


def dirty_reasons(checkout: Checkout) -> list[str]:
    """Why the tree is not exactly its commit + pin + series (empty when it is).

    - vendor/'s subtree against pristine(UPSTREAM.toml) + series (`check`), in any tree;
    - links anywhere in what the wheel is made of (never followed, never shipped, even dirty);
    - in a git checkout, every change to vendor/vllm_fused_moe/, release/overlay/runtime/ and
      patches/ that is not committed: hand edits of the hook, a deleted file, an extra file
      (ignored ones too, since the build would ship them), so the commit in the build info is the truth.
    """
    layout = checkout.layout
    tops = (layout.vendored, layout.runtime, layout.patches)
    links = [p for top in tops for p in _walk(top) if p.is_symlink()]
    if links:
        raise BadInputError(
            f"{links[0]} is a symbolic link; a build never follows or ships links (not even with --allow-dirty)",
            hint="replace the link by the file it stands for, or remove it",
        )
    found = checkout.drift()[0]
    reasons = [f"{d.path} ({d.kind})" for d in found]
    toplevel = git("rev-parse", "--show-toplevel", cwd=layout.root, check=False)
    if toplevel.ok and Path(toplevel.out.strip()).resolve() == layout.root.resolve():
        paths = [top.relative_to(layout.root).as_posix() for top in tops]
        listing = git(
            "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching", "--", *paths,
            cwd=layout.root,
        ).stdout  # fmt: skip
        for entry in listing.decode("utf-8", "replace").split("\0"):
            code, path = entry[:2], entry[3:]
            if not entry or "__pycache__" in path.split("/") or path.endswith(".pyc"):
                continue
            what = {"??": "not committed", "!!": "ignored by git but would be shipped"}.get(code, "changed")
            reasons.append(f"{path} ({what})")
    return reasons


def _walk(top: Path) -> list[Path]:
    found: list[Path] = []
    if top.is_symlink():
        return [top]
    for directory, subdirs, files in os.walk(top):
        found += [Path(directory) / name for name in [*subdirs, *files]]
    return found
