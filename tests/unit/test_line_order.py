"""A release line's series replays the common patches in the order of patches/series; `check` refuses another.

In this process, on a copy of the project: a second common patch put before 0001 in patches/series (a reorder),
and a line whose variants still replay 0001 first. The patches are copies of the checked-in ones, renamed: the
order check reads names, `Varies:` and entry kinds, never a diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import copy_project
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, MisorderedLineError
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.series import EntryKind, Series
from release.queue.load import is_head, line_series, require_accounted
from release.queue.snapshot import Checkout

SECOND = "0002-second-bug.patch"


def test_a_reorder_of_patches_series_that_a_line_does_not_follow_is_refused_by_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = copy_project(tmp_path)
    layout = Layout(project)
    [first] = Series.load(layout.series).names
    (layout.patches / SECOND).write_text((layout.patches / first).read_text())
    layout.series.write_text(layout.series.read_text().replace(first + "\n", f"{SECOND}\n{first}\n"))
    varied = None
    for line in read_lines(layout.lines).lines:
        if is_head(layout, line):
            continue
        path = line.series_path(project)
        entries = line_series(layout, line).entries
        variant = next((e.name for e in entries if e.kind == EntryKind.PATCH), None)
        if varied is None and variant is not None:
            # This line's own variant of the second patch, after its variant of 0001: the old order.
            text = (line.patch_dir(project) / variant).read_text().replace(f"Varies: {first}", f"Varies: {SECOND}")
            (line.patch_dir(project) / f"0002-{line.name}.patch").write_text(text)
            path.write_text(path.read_text() + f"0002-{line.name}.patch\n")
            varied = (line, variant)
        else:
            path.write_text(path.read_text() + f"skip {SECOND}: the test's second patch is not on this line\n")
    assert varied is not None, "no release line has a variant of 0001 to copy"
    line, variant = varied
    assert Patch.load(line.patch_dir(project) / variant, line.prefixes).varies == first

    code = main(["--root", str(project), "check"])
    err = capsys.readouterr().err
    rel = line.series_path(project).relative_to(project).as_posix()
    assert code == EXIT_BAD_INPUT, err
    assert (
        f"line {line.name} ({rel}) replays {first}, {SECOND}, but patches/series orders them {SECOND}, {first}" in err
    )

    # The line's series in the order of patches/series: accepted.
    path = line.series_path(project)
    text = path.read_text().replace(f"0002-{line.name}.patch\n", "")
    path.write_text(text.replace(variant + "\n", f"0002-{line.name}.patch\n{variant}\n"))
    require_accounted(Checkout.load(layout))
    with pytest.raises(MisorderedLineError):  # and the other way round again: refused
        path.write_text(text + f"0002-{line.name}.patch\n")
        require_accounted(Checkout.load(layout))
