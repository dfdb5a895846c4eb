"""Every bug patch names its regression test, on every release line: `check` refuses one that does not.

publish proves each wheel's fixes with these tests (release/evidence); a line's test must cover the
classes the line's fix changes, which patches/lines.toml's `live` table names per line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import CHECKOUT, copy_project
from release.core.layout import Layout
from release.model.lines import HEAD_LINE, read_lines
from release.model.patch import Patch
from release.model.series import EntryKind
from release.pq.carry import classes_changed
from release.queue.load import Queue, account, is_head, line_entries
from release.queue.regression import bug_patches, bug_tests


@pytest.mark.rules
@pytest.mark.parametrize("line", [line.name for line in read_lines(Layout(CHECKOUT).lines).lines])
def test_each_bug_has_a_test_on_each_line_that_imports_the_classes_its_fix_changes(line: str) -> None:
    layout = Layout(CHECKOUT)
    tests = bug_tests(layout, line)
    assert [t.patch for t in tests] == [p.name for p in bug_patches(layout)]
    on_line = read_lines(layout.lines).get(line)
    said = account(line_entries(layout, on_line)) if not is_head(layout, on_line) else {}
    for test in tests:
        imported = set(re.findall(r"^\s+(\w+PrepareAndFinalize),$", test.text, re.M))
        # The line's own change of the bug: its variant there, the common patch it takes, or (a skip: the line's
        # releases do without the bug, which the test proves on them) none; the test imports what it changes.
        entry = said.get(test.patch)
        if entry is None or entry.kind == EntryKind.TAKE:
            common = layout.patches / test.patch
            changed = classes_changed(Patch.load(common if common.is_file() else layout.retired / test.patch))
        elif entry.kind == EntryKind.PATCH:
            changed = classes_changed(Patch.load(on_line.patch_dir(CHECKOUT) / entry.name, on_line.prefixes))
        else:
            changed = []
        live = set(on_line.live_classes)
        assert imported and imported <= live, (test.path, imported, live)
        assert live & set(changed) <= imported, (test.path, imported, changed)


def test_a_retired_bug_patch_still_needs_its_test_on_the_tags_that_replay_it(tmp_path: Path) -> None:
    """A retired patch is replayed on every tag older than its upstream release: its bug stays one the evidence
    proves there, with the same test."""
    project = copy_project(tmp_path)
    layout = Layout(project)
    bugs = [p.name for p in bug_patches(layout)]
    patch = bug_patches(layout)[0]
    before = bug_tests(layout, HEAD_LINE)
    layout.retired.mkdir(exist_ok=True)
    (layout.patches / patch.name).rename(layout.retired / patch.name)
    layout.series.write_text(layout.series.read_text().replace(f"{patch.name}\n", f"retired {patch.name}\n"))
    assert patch.name not in [p.name for p in Queue.load(layout).patches]  # the series applies it no more
    assert sorted(p.name for p in bug_patches(layout)) == sorted(bugs)
    assert sorted(bug_tests(layout, HEAD_LINE), key=str) == sorted(before, key=str)
