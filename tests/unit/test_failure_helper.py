"""tests/helpers/failure.py reads an error line as the CLI writes it (release/cli.py, `report`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from helpers.failure import failed, failures
from release.cli import report
from release.core.errors import LockedError


def test_it_reads_back_what_report_writes_with_temp_paths_and_times_filtered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = LockedError(f"another command still holds {tmp_path / 'project'} after 1.5 s; {tempfile.gettempdir()}/x")
    assert report(refused) == refused.exit_code
    error = failed(capsys.readouterr().err, tmp_path)
    assert (error.reference, error.message, error.hint) == (LockedError.reference, str(refused), refused.hint)
    assert error.shown == (
        f"error[{LockedError.reference}]: another command still holds [TMP]/project after [TIME]; [TEMPDIR]/x\n"
        f"hint: {LockedError.default_hint}"
    )


def test_it_counts_every_error_line_and_takes_the_runtime_s_plain_one() -> None:
    said = "note: one\nerror[drift]: a\nhint: h\nerror: vllm-fused-moe 1.0 is recorded as installed\n"
    assert [(f.reference, f.message, f.hint) for f in failures(said)] == [
        ("drift", "a", "h"),
        ("", "vllm-fused-moe 1.0 is recorded as installed", ""),
    ]
    with pytest.raises(AssertionError, match="expected one error line, found 2"):
        failed(said)
    with pytest.raises(AssertionError, match="found 0"):
        failed("all fine\n")
