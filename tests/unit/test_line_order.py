"""A release line's series replays the common patches in the order of patches/series; `check` refuses another.

In this process, on a copy of the project, whatever its queue holds: a second common patch (the next free number)
put before the first in patches/series (a reorder), and a line whose variants still replay the first before it.
The patches are copies of the checked-in ones, renamed: the order check reads names, `Varies:` and entry kinds,
never a diff.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import copy_project
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, MisorderedLineError
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.series import EntryKind, Series
from release.pq.export import used_names
from release.pq.names import next_number
from release.queue.load import account, is_head, line_entries, require_accounted
from release.queue.snapshot import Checkout


def test_a_reorder_of_patches_series_that_a_line_does_not_follow_is_refused_by_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = copy_project(tmp_path)
    layout = Layout(project)
    first = Series.load(layout.series).names[0]
    number = next_number(used_names(layout))
    second = f"{number:04d}-second-bug.patch"  # a name no patch of the copy has used, whatever its queue holds
    (layout.patches / second).write_text((layout.patches / first).read_text())
    layout.series.write_text(layout.series.read_text().replace(first + "\n", f"{second}\n{first}\n", 1))
    varied = None
    for line in read_lines(layout.lines).lines:
        if is_head(layout, line):
            continue
        path = line.series_path(project)
        said = account(line_entries(layout, line)).get(first)
        if varied is None and said is not None and said.kind == EntryKind.PATCH:
            # This line's own variant of the second patch, right after its variant of the first: the old order.
            own = f"{number:04d}-{line.name}.patch"
            text = (line.patch_dir(project) / said.name).read_text().replace(f"Varies: {first}", f"Varies: {second}")
            (line.patch_dir(project) / own).write_text(text)
            path.write_text(re.sub(rf"(?m)^{re.escape(said.name)}$", f"{said.name}\n{own}", path.read_text(), count=1))
            varied = (line, said.name, own)
        else:
            path.write_text(path.read_text() + f"skip {second}: the test's second patch is not on this line\n")
    assert varied is not None, "no release line has a variant of the first patch to copy"
    line, variant, own = varied
    assert Patch.load(line.patch_dir(project) / own, line.prefixes).varies == second
    replayed = [n for n, e in account(line_entries(layout, line)).items() if e.kind != EntryKind.SKIP]
    wanted = [n for n in Series.load(layout.series).names if n in replayed]
    assert replayed.index(first) < replayed.index(second) and wanted.index(second) < wanted.index(first)

    code = main(["--root", str(project), "check"])
    err = capsys.readouterr().err
    rel = line.series_path(project).relative_to(project).as_posix()
    assert code == EXIT_BAD_INPUT, err
    refused = (
        f"line {line.name} ({rel}) replays {', '.join(replayed)}, but patches/series orders them {', '.join(wanted)}"
    )
    assert refused in err, err

    # The line's series in the order of patches/series: accepted.
    path = line.series_path(project)
    text = path.read_text().replace(f"{own}\n", "")
    path.write_text(text.replace(variant + "\n", f"{own}\n{variant}\n"))
    require_accounted(Checkout.load(layout))
    with pytest.raises(MisorderedLineError):  # and the other way round again: refused
        path.write_text(text.replace(variant + "\n", f"{variant}\n{own}\n"))
        require_accounted(Checkout.load(layout))
