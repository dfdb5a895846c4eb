"""The patch queue on disk: load it, undo it (to recover the pristine tree), and
decide for one patch whether it applies, is already upstream, or conflicts."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from release.errors import ToolMissingError
from release.gitrepo import write_files
from release.layout import UPSTREAM_SUBTREE, Layout
from release.model import Hunk, Patch, Pin, Series, sha256_hex


@dataclass(frozen=True)
class Queue:
    pin: Pin
    series: Series
    patches: list[Patch]

    @classmethod
    def load(cls, layout: Layout) -> "Queue":
        pin = Pin.load(layout.upstream_toml)
        series = Series.load(layout.series)
        patches = [Patch.load(layout.patches / name) for name in series.names]
        return cls(pin, series, patches)


# ------------------------------------------------------------- undoing the queue


@dataclass(frozen=True)
class Drift:
    """One file of vendor/ that is not pristine + series."""

    path: str
    kind: str  # "edited", "added", "missing", "patch-does-not-reverse"
    detail: str

    def line(self) -> str:
        return f"{self.kind:<24} {self.path}  ({self.detail})"


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
            if _git_apply(root, ["--reverse", "--check", str(patch_file)]):
                _git_apply(root, ["--reverse", str(patch_file)])
                continue
            # Undo file by file, so one edited file does not hide the state of the others.
            for path in patch.files:
                only = [f"--include={path}", "--reverse", str(patch_file)]
                if _git_apply(root, [*only[:-1], "--check", only[-1]]):
                    _git_apply(root, only)
                else:
                    blocked.setdefault(path[len(UPSTREAM_SUBTREE) + 1:], patch.name)
        from release.layout import read_tree

        recovered = read_tree(root / UPSTREAM_SUBTREE)
    return recovered, blocked


def _git_apply(cwd: Path, args: list[str]) -> bool:
    try:
        proc = subprocess.run(["git", "apply", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise ToolMissingError("git is not installed") from None
    return proc.returncode == 0


def drift(layout: Layout, queue: Queue) -> tuple[list[Drift], dict[str, bytes]]:
    """Every way vendor/ differs from pristine(UPSTREAM.toml) + series, file by file.

    Also returns the recovered pristine files (valid wherever no drift was found).
    """
    vendor = layout.vendor_files()
    pristine, blocked = unapply(vendor, queue.patches)
    found: list[Drift] = []
    for name in sorted(set(queue.pin.files) | set(pristine)):
        expected = queue.pin.files.get(name)
        if name in blocked:
            found.append(Drift(name, "patch-does-not-reverse", f"{blocked[name]} no longer matches this file; it was edited"))
        elif expected is None:
            found.append(Drift(name, "added", "not in the pinned upstream subtree nor created by a patch"))
        elif name not in pristine:
            found.append(Drift(name, "missing", f"upstream {queue.pin.tag} has it"))
        elif sha256_hex(pristine[name]) != expected:
            found.append(Drift(name, "edited", f"differs from upstream {queue.pin.tag} + series"))
    return found, pristine


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
    after = [line[1:] for line in lines[last + 1:] if line.startswith(" ")]
    lead = _normalise(before)[-1:]
    tail = _normalise(after)[:1]
    middle = lines[first:last + 1]
    pre = lead + _normalise([l[1:] for l in middle if l[:1] in " -"]) + tail
    post = lead + _normalise([l[1:] for l in middle if l[:1] in " +"]) + tail
    return pre, post


def _contains(haystack: list[str], needle: list[str]) -> bool:
    if not needle:
        return False
    width = len(needle)
    return any(haystack[i:i + width] == needle for i in range(len(haystack) - width + 1))


def effect_present(patch: Patch, files: dict[str, bytes]) -> bool:
    """The semantic check: every hunk's post-image is in `files` and its pre-image is gone."""
    for hunk in patch.hunks:
        data = files.get(hunk.path[len(UPSTREAM_SUBTREE) + 1:])
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
