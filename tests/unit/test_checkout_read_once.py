"""A command reads the checkout once (release.queue.snapshot.Checkout) and its stages share that read.

In this process, on a copy of the project: `check` runs every gate over every line and train tag, and reads
patches/series, patches/lines.toml and patches/train.toml once each, and every other file of patches/ and
vendor/'s pins at most once. (`build --all` is counted the same way
in tests/overlay/test_build_train.py, where its wheels are built.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import copy_project
from helpers.failure import failed
from helpers.reads import count_reads
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, MissingFixError
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.series import Entry, EntryKind
from release.model.train import Train
from release.queue.load import is_head, line_series


def checkout_files(layout: Layout) -> list[Path]:
    """Every file of patches/ (each patch, series, lines.toml, train.toml, the regression tests) and vendor/'s pins."""
    found = [p for p in layout.patches.rglob("*") if p.is_file()]
    return [*found, layout.upstream_toml, layout.verified_toml]


def over_once(reads: dict[Path, int], layout: Layout) -> dict[str, int]:
    """The checkout's files a command read more than once, with how often."""
    counted = {p.relative_to(layout.root).as_posix(): reads[p.resolve()] for p in checkout_files(layout)}
    return {path: count for path, count in counted.items() if count > 1}


def test_check_reads_the_series_lines_and_train_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A line with a train tag skips the common patch it carried a variant of: `check` goes through the line
    # accounting, the stale variants and every train tag's bugs, and refuses that tag (before any git runs).
    project = copy_project(tmp_path)
    layout = Layout(project)
    train = Train.load(layout.train)
    for line in read_lines(layout.lines).lines:
        series = line_series(layout, line)
        variant = next((e for e in series.entries if e.kind == EntryKind.PATCH), None)
        if is_head(layout, line) or variant is None or not any(e.line == line.name for e in train.entries):
            continue
        common = Patch.load(line.patch_dir(project) / variant.name, line.prefixes).varies
        if common is not None:
            break
    else:
        raise AssertionError("the train has no older line with a variant")
    skip = Entry(EntryKind.SKIP, common, "a maintainer's mistake")
    line.series_path(project).write_text(series.replace(variant.name, skip).dumps())
    reads = count_reads(monkeypatch)

    code = main(["--root", str(project), "check"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert failed(err).reference == MissingFixError.reference, err
    once = {p.relative_to(project).as_posix(): reads[p.resolve()] for p in (layout.series, layout.lines, layout.train)}
    assert once == dict.fromkeys(once, 1), once
    # Every other file of patches/ (each patch: the queue's, each line's, the known bugs', a variant's common
    # patch) and vendor/'s pins: at most once, whichever gate asked first.
    assert reads[(layout.patches / common).resolve()] == 1
    assert over_once(reads, layout) == {}
