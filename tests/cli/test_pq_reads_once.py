"""A `pq` command reads the checkout once (release.queue.snapshot.Checkout) and its stages share that read.

In this process, on a copy of the project, with real git: `pq drop` makes the work tree (the head's import),
takes the patch's commit out and exports, dropping what every older line's series says of it; `pq export
--check` then compares the tree with patches/ and vendor/. Each reads patches/series and patches/lines.toml
once, and every other file of patches/ and vendor/'s pins at most once: the import and the
export read the queue of the one Checkout the command loads under its lock, not each their own. `pq skip`
reads the line's series once, for what the line says of the patch and where its entry goes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.reads import count_reads, over_once
from helpers.synthetic import add_patch
from release.cli import main
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.series import EntryKind
from release.pq.export import used_names
from release.pq.names import next_number
from release.queue.load import is_head, line_series


def test_pq_drop_and_export_check_read_each_file_of_patches_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(project)
    name = f"{next_number(used_names(layout)):04d}-mori-first.patch"
    add_patch(project, name, "mori.py", "import torch\n", "import torch  # first\n", "mori: first")
    skipping = [
        line.name
        for line in read_lines(layout.lines).lines
        if not is_head(layout, line) and any(e.kind == EntryKind.SKIP for e in line_series(layout, line).entries)
    ]
    assert skipping, "add_patch wrote a skip into no older line: the drop would read no line's series"
    once = (layout.series, layout.lines)  # what both need (train.toml, like every other file: at most once)

    reads = count_reads(monkeypatch)
    code = main(["--root", str(project), "pq", "drop", name])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert re.search(rf"(?m)^{re.escape(name)} +dropped$", out.out), out.out
    assert not (layout.patches / name).exists()
    assert {p.name: reads[p.resolve()] for p in once} == {p.name: 1 for p in once}, reads
    # The dropped patch (read by the import and the export alike before they shared the command's Checkout).
    assert reads[(layout.patches / name).resolve()] == 1, reads
    assert over_once(reads, layout) == {}

    reads.clear()
    code = main(["--root", str(project), "pq", "export", "--check"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "nothing to write" in out.out, out.out
    assert {p.name: reads[p.resolve()] for p in once} == {p.name: 1 for p in once}, reads
    assert all(reads[p.resolve()] == 1 for p in layout.patches.glob("*.patch")), reads
    assert over_once(reads, layout) == {}


def test_pq_skip_reads_the_lines_series_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A common patch every older line is silent about: skip reads the line's series to find where the entry goes
    # and what the line already says of it (its entries with their patches), from the one Checkout.
    layout = Layout(project)
    name = f"{next_number(used_names(layout)):04d}-mori-first.patch"
    add_patch(project, name, "mori.py", "import torch\n", "import torch  # first\n", "mori: first", lines_skip=False)
    line = next(line for line in read_lines(layout.lines).lines if not is_head(layout, line))
    series = line.series_path(project)

    reads = count_reads(monkeypatch)
    code = main(["--root", str(project), "pq", "skip", name, "--line", line.name, "--reason", "no mori here"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"skip {name}: no mori here" in series.read_text().splitlines(), out.out
    assert [reads[p.resolve()] for p in (layout.series, layout.lines, series)] == [1, 1, 1], reads
    assert over_once(reads, layout) == {}
