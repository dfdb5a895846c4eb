"""The train always records its head: vendor/ is the head's entry, so a train file without it (or an
empty one) is none the tool writes, and the commands that read the train as a whole refuse it (exit 2)
before they do anything: `train list` and `rebase`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import snapshot
from helpers.failure import failed
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, TrainFileError
from release.core.layout import Layout
from release.model.pin import Pin


def without_head(text: str, head: str) -> str:
    """The train file with the head's [[release]] table cut out."""
    tables = re.split(r"(?m)^(?=\[\[release\]\]$)", text)
    kept = [t for t in tables if not re.search(rf'(?m)^tag = "{re.escape(head)}"$', t)]
    assert len(kept) == len(tables) - 1, "the head has one entry"
    return "".join(kept)


@pytest.mark.parametrize("spoil", ["empty", "no head"])
@pytest.mark.parametrize("argv", [["train", "list"], ["rebase", "v9.9.9", "--dry-run", "--from", "dir:/nonexistent"]])
def test_a_train_without_its_head_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str], spoil: str, argv: list[str]
) -> None:
    layout = Layout(project)
    head = Pin.load(layout.upstream_toml).tag
    layout.train.write_text("" if spoil == "empty" else without_head(layout.train.read_text(), head))
    before = snapshot(project)
    assert main(["--root", str(project), *argv]) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == TrainFileError.reference
    assert error.message == f"{layout.train} has no entry for the head {head} (vendor/, UPSTREAM.toml)" + (
        ": it holds no release at all" if spoil == "empty" else ""
    )
    assert snapshot(project) == before
