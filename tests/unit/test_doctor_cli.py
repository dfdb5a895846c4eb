"""`release doctor --python`: the report read from what the other interpreter printed on stdout."""

from __future__ import annotations

import json

from release.overlay.doctor_run import report_in

REPORT = json.dumps({"exit_code": 0, "verdict": "fixed-live", "summary": "{ not a report }"}, indent=2)


def test_the_report_is_read_past_what_the_environment_printed_at_start_up() -> None:
    """Issue 38, 3: a .pth (an impostor's) printing on stdout made the command exit 2 with the report
    inside its error. The report is read; what else was printed is kept apart, for a warning."""
    noise = "hello from a .pth\n{not json\n"
    found = report_in(noise + REPORT + "\n" + "bye\n")
    assert found is not None
    data, text, rest = found
    assert data["verdict"] == "fixed-live" and json.loads(text) == data
    assert rest == noise + "bye\n"
    assert report_in(REPORT + "\n") == (data, REPORT + "\n", "")


def test_no_report_is_none() -> None:
    assert report_in("") is None and report_in("hello\n") is None
    assert report_in('{"exit_code": 0}\n') is None  # JSON, but not a doctor's report
