"""Every bug patch names its regression test, on every release line: `check` refuses one that does not.

publish proves each wheel's fixes with these tests (release/evidence); a line's test must cover the
classes the line's fix changes, which patches/lines.toml's `live` table names per line.
"""

from __future__ import annotations

import re

import pytest

from helpers import REPO
from release.core.layout import Layout
from release.model.lines import read_lines
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
