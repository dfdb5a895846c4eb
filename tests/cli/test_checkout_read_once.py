"""A command reads the checkout once (release.queue.snapshot.Checkout) and its stages share that read.

In this process, on a copy of the project: `check` runs every gate over every line and train tag, and reads
patches/series, patches/lines.toml and patches/train.toml once each, and every other file of patches/ and
vendor/'s pins at most once; `publish` reads those files at most once too, and opens each wheel, given or
held by the index, once (an added one once more, to copy it in). (`build --all` is counted the same way
in tests/overlay/test_build_train.py, where its wheels are built.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import copy_project
from helpers.failure import failed
from helpers.reads import count_opens, count_reads, over_once
from helpers.synthetic import demo_wheel
from helpers.train import load_train
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, MissingFixError
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.series import Entry, EntryKind
from release.overlay import publish as publish_module
from release.queue.load import is_head, line_series


def test_check_reads_the_series_lines_and_train_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A line with a train tag skips the common patch it carried a variant of: `check` goes through the line
    # accounting, the stale variants and every train tag's bugs, and refuses that tag (before any git runs).
    project = copy_project(tmp_path)
    layout = Layout(project)
    train = load_train(layout)
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


def test_publish_reads_the_checkout_once_and_each_wheel_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An index that holds one wheel; a publish of it again (the same bytes), of a new level of its release (other
    # files: held to the newest the index holds) and of another release: the fix gate, the plan, the repair, the
    # pages and the requirements files all ask about every wheel, given and held. (Releases no record names, so
    # that no regression test runs: the evidence of what they add is gathered without a process.)
    project = copy_project(tmp_path)
    layout = Layout(project)
    dist, index = tmp_path / "dist", tmp_path / "index"

    def overlay(version: str) -> Path:
        release = version.split("+")[0]
        facts: dict[str, object] = {"vllm_tag": f"v{release}", "vllm_version": release, "patches": []}
        return demo_wheel(dist, version, facts)

    # Doubles of the proof (the rebuild at the wheel's commit and the three runs per bug): demo wheels are no build
    # of the checkout, and the real proof's own reads are tests/e2e's (test_rebuild.py, test_release_step.py).
    # The checkout's gates (`refuse_as_check`), the fix gate, the plan, the pages and the records stay real.
    monkeypatch.setattr(publish_module, "origins", lambda layout, wheels, allow_dirty: [])
    monkeypatch.setattr(publish_module, "prove", lambda checkout, wheels, options, held, stack, workers=None: [])
    held = overlay("0.0.1+fm.1")
    assert main(["--root", str(project), "publish", str(dist), str(index)]) == 0, capsys.readouterr().err
    given = [held, overlay("0.0.1+fm.2"), overlay("0.0.2+fm.1")]
    reads, opens = count_reads(monkeypatch), count_opens(monkeypatch)

    code = main(["--root", str(project), "publish", str(dist), str(index)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"already published (same bytes) {held.name}" in out.out
    assert all(f"published {wheel.name}" in out.out for wheel in given[1:])
    assert over_once(reads, layout) == {}
    in_index = index / "simple" / "vllm-fused-moe" / held.name
    # Read once each (its sha256 taken in that one open); a wheel the publish adds is opened once more, to be
    # copied into the index (the copy's own hash is of the copy).
    assert opens[held.resolve()] == 1 and opens[in_index.resolve()] == 1, opens
    assert [opens[wheel.resolve()] for wheel in given[1:]] == [2, 2], opens
