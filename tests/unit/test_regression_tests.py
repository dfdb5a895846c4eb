"""Every bug patch names its regression test, on every release line: `check` refuses one that does not.

publish proves each wheel's fixes with these tests (release/evidence); a line's test must cover the
classes the line's fix changes, which patches/lines.toml's `live` table names per line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import REPO, copy_project
from release.core.layout import Layout
from release.model.lines import HEAD_LINE, read_lines
from release.queue.load import Queue
from release.queue.regression import bug_patches, bug_tests


@pytest.mark.parametrize("line", [line.name for line in read_lines(Layout(REPO).lines).lines])
def test_each_bug_has_a_test_on_each_line_that_imports_the_lines_classes(line: str) -> None:
    layout = Layout(REPO)
    tests = bug_tests(layout, line)
    assert [t.patch for t in tests] == [p.name for p in bug_patches(layout)] and tests
    classes = read_lines(layout.lines).get(line).live_classes
    for test in tests:
        imported = set(re.findall(r"^\s+(\w+PrepareAndFinalize),$", test.text, re.M))
        assert imported == set(classes), (test.path, imported, classes)


def test_a_retired_bug_patch_still_needs_its_test_on_the_tags_that_replay_it(tmp_path: Path) -> None:
    """A retired patch is replayed on every tag older than its upstream release: its bug stays one the evidence
    proves there, with the same test."""
    project = copy_project(tmp_path)
    layout = Layout(project)
    [patch] = bug_patches(layout)
    before = bug_tests(layout, HEAD_LINE)
    layout.retired.mkdir(exist_ok=True)
    (layout.patches / patch.name).rename(layout.retired / patch.name)
    layout.series.write_text(layout.series.read_text().replace(f"{patch.name}\n", f"retired {patch.name}\n"))
    assert not Queue.load(layout).patches  # the series applies nothing at the head now
    assert [p.name for p in bug_patches(layout)] == [patch.name]
    assert bug_tests(layout, HEAD_LINE) == before
