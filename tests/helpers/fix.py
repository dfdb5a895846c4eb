"""The checkout's bug fix, found from its data: what a behaviour test takes when it needs "some bug-fix patch
of the queue" (and, per release line, that patch's variant), never a file name.

Issue 46: a test of a behaviour does not depend on the checkout's queue. Renaming, renumbering or retiring
today's patch must not break a test of how the tool treats a patch; tests/hygiene/test_patch_names.py fails
when a test names a patch file of patches/. Each file is parsed with the tool's own model (the series, the
patch), so what counts as "the first bug fix" is what the tool reads, not a glob of file names.
"""

from __future__ import annotations

from pathlib import Path

from helpers import REPO
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.series import EntryKind, Series


def fix_patch(root: Path = REPO) -> Path:
    """patches/NAME of `root`: the first patch of patches/series that fixes a bug (a `Bug:` trailer)."""
    layout = Layout(root)
    for name in Series.load(layout.series).names:
        if not Patch.load(layout.patches / name).purpose.downstream:
            return layout.patches / name
    raise AssertionError(f"{layout.series} applies no patch with a Bug: trailer: the tests need one")


def fix_variant(line: str, root: Path = REPO) -> Path:
    """What release line `line` of `root` carries for fix_patch(): its own variant (patches/lines/LINE/NAME,
    `Varies:` the fix), as that line's series names it, or the common patch where the series takes it (the
    head line's series is patches/series itself)."""
    layout, common = Layout(root), fix_patch(root)
    found = read_lines(layout.lines).get(line)
    series_path = found.series_path(layout.root)
    if series_path == layout.series:
        return common
    for entry in Series.load(series_path, common=layout.patches).entries:
        if entry.kind == EntryKind.TAKE and entry.name == common.name:
            return common
        if entry.kind == EntryKind.PATCH:
            path = found.patch_dir(layout.root) / entry.name
            if Patch(entry.name, path.read_text(encoding="utf-8")).varies == common.name:
                return path
    raise AssertionError(f"{series_path} carries no variant of {common.name} (it skips it, or names none)")


def fix_variants(root: Path = REPO) -> dict[str, Path]:
    """fix_variant() of every release line that has its own series (patches/lines/LINE/series), by line."""
    layout = Layout(root)
    return {
        line.name: fix_variant(line.name, root)
        for line in read_lines(layout.lines).lines
        if line.series_path(layout.root) != layout.series
    }
