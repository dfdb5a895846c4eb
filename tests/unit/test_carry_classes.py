"""The carry report names a variant that changes a class none of its line's backends builds.

A rule of the checkout's own lines (any queue): each line's variant of a bug's patch changes its line's
`live` classes only (what the carry report would otherwise name). The behaviour, on a variant of the test's
own: the same change moved into a base class the line does not build (where a conflict once left its
markers) is named, with the classes the line builds.
"""

from __future__ import annotations

import pytest

from helpers import CHECKOUT
from release.core.layout import Layout
from release.model.lines import Line, read_lines
from release.model.patch import Patch
from release.pq.carry import LineCarry, classes_changed, noted, unused_classes
from release.queue.load import is_head, line_series

BASE = "SharedBasePrepareAndFinalize"  # a made-up base class that no line builds


@pytest.mark.rules
def test_each_lines_variant_of_a_bug_patch_changes_only_the_classes_its_backends_build() -> None:
    layout = Layout(CHECKOUT)
    for line in read_lines(layout.lines).lines:
        if is_head(layout, line):
            continue
        for entry in line_series(layout, line).entries:
            path = line.patch_dir(CHECKOUT) / entry.name
            if not path.is_file():
                continue
            variant = Patch.load(path, line.prefixes)
            if variant.purpose.downstream:  # a downstream change may land anywhere; a fix must be live
                continue
            assert unused_classes(line, variant) == [], path


def _variant(heading: str) -> Patch:
    """A line's variant in the shape classes_changed reads: one hunk, under the class its heading names."""
    return Patch(
        "0001-a-test-variant.patch",
        "Subject: a test's variant\n\n---\n"
        "diff --git a/m.py b/m.py\nindex 1111111..2222222 100644\n--- a/m.py\n+++ b/m.py\n"
        f"@@ -10,2 +10,3 @@ {heading}\n     def finalize(self) -> None:\n+        assert True\n         pass\n",
    )


def test_a_variant_that_changes_a_class_no_backend_builds_is_named_in_the_carry_report() -> None:
    live = ("FirstLivePrepareAndFinalize", "SecondLivePrepareAndFinalize")
    line = Line("a_line", ("a/m.py",), ("a/m.py",), live_classes=live)
    in_live = _variant(f"class {live[0]}({BASE}):")
    assert classes_changed(in_live) == [live[0]] and unused_classes(line, in_live) == []
    assert noted(LineCarry(line.name, "hand-made", "left as it is"), line, in_live).unused_classes == []

    moved = _variant(f"class {BASE}(mk.FusedMoEPrepareAndFinalize):")
    assert unused_classes(line, moved) == [BASE]
    done = noted(LineCarry(line.name, "hand-made", "left as it is"), line, moved)
    assert done.unused_classes == [BASE]
    assert f"it changes {BASE}, which none of the line's backends builds" in done.detail
    assert all(name in done.detail for name in live)
    # A line that names no classes has none unused.
    assert unused_classes(Line("bare", ("a/m.py",), ("a/m.py",)), moved) == []
