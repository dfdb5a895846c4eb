"""The carry report names a variant that changes a class none of its line's backends builds.

The checked-in variant of the line whose fix lives in a subclass (its `live` classes, which `builds` maps each
backend to): it changes that class only. The same variant with its hunk moved into the base class the
all-gather class shares (where a conflict once left its markers) is named, with the classes the line builds.
"""

from __future__ import annotations

from helpers import REPO
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.pq.carry import LineCarry, classes_changed, noted, unused_classes
from release.queue.load import is_head, line_series

BASE = "FlashInferCutlassMoEPrepareAndFinalize"  # the base of the all-to-all and all-gather classes of that line


def test_a_variant_that_changes_a_class_no_backend_builds_is_named_in_the_carry_report() -> None:
    layout = Layout(REPO)
    checked, moved_into_base = 0, 0
    for line in read_lines(layout.lines).lines:
        if is_head(layout, line):
            continue
        for entry in line_series(layout, line).entries:
            path = line.patch_dir(REPO) / entry.name
            if not path.is_file():
                continue
            variant = Patch.load(path, line.prefixes)
            assert classes_changed(variant) and set(classes_changed(variant)) <= set(line.live_classes), path
            assert unused_classes(line, variant) == []
            checked += 1
            if BASE not in variant.text:
                continue
            [hunk] = variant.hunks
            heading = hunk.header.split("@@")[-1].strip()
            moved = Patch(variant.name, variant.text.replace(heading, f"class {BASE}(mk.FusedMoEPrepareAndFinalize):"))
            assert unused_classes(line, moved) == [BASE]
            done = noted(LineCarry(line.name, "hand-made", "left as it is"), line, moved)
            assert done.unused_classes == [BASE]
            assert f"it changes {BASE}, which none of the line's backends builds" in done.detail
            assert all(name in done.detail for name in line.live_classes)
            moved_into_base += 1
    assert checked and moved_into_base == 1
