"""publish's and evidence's progress (release/evidence/progress.py): a line per run with its time, and on a
terminal never a silence longer than the heartbeat while a run is under way (issue 44: 909 s without a word)."""

from __future__ import annotations

import io
import time

import pytest

from release.evidence import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_run_is_named_every_heartbeat_and_said_with_its_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.3)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    stamps: list[float] = []
    real_say = progress.say

    def say(text: str) -> None:
        stamps.append(time.monotonic())
        real_say(text)

    monkeypatch.setattr(progress, "say", say)

    def slept() -> str:
        time.sleep(2.2)
        return "done"

    started = time.monotonic()
    with progress.heartbeat("evidence"):
        result = progress.timed("evidence: vLLM vX bug: pristine", slept, str)
    said = terminal.getvalue().splitlines()
    assert result == "done"
    assert said[-1].startswith("evidence: vLLM vX bug: pristine: done (2.") and said[-1].endswith(" s)"), said
    assert any(line.startswith("evidence: still working: vLLM vX bug: pristine (") for line in said), said
    gaps = [b - a for a, b in zip([started, *stamps], stamps, strict=False)]
    assert max(gaps) < 1.5, gaps  # the heartbeat (0.3 s here) plus its 1 s tick


def test_no_heartbeat_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log file gets the line of each run, not a tick every few seconds."""
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.1)
    plain = io.StringIO()
    monkeypatch.setattr("sys.stderr", plain)
    with progress.heartbeat("evidence"):
        progress.timed("evidence: run", lambda: time.sleep(1.3), lambda _: "passed")
    assert [line.split(" (")[0] for line in plain.getvalue().splitlines()] == ["evidence: run: passed"]
