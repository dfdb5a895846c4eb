"""What `build` says goes through release/core/log.py: `-q` leaves its notes out, stdout stays the result."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from release.core import log
from release.overlay.train_build import note_no_wheel


@pytest.fixture
def level() -> Iterator[None]:
    yield
    log.configure(log.DEFAULT)


def test_a_tag_without_a_wheel_is_a_note_that_q_leaves_out(level: None, capsys: pytest.CaptureFixture[str]) -> None:
    note_no_wheel(["v0.0.1"])
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err == "note: v0.0.1 carries no patch (the head at a release that has every fix): no wheel\n"
    log.configure(log.QUIET)
    note_no_wheel(["v0.0.1"])
    assert capsys.readouterr() == ("", "")
