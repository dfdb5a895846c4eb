"""An output that cannot be written is bad input before the work, not a failure after it (exit 2, one
line, nothing changed): `upstream-pr --out` (/dev/null, the queue's own patches/), `train watch
--report` under a file, `train watch ''` (a directory, not a scan), `scan` in a read-only checkout.
Run in this process: each refusal comes before anything that starts a process or reads the network.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import snapshot
from helpers.failure import Failure, failed
from helpers.fix import fix_patch
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, BadInputError, OutputNotWritableError
from release.core.layout import Layout


def refused(capsys: pytest.CaptureFixture[str], project: Path, *argv: str) -> Failure:
    code = main(["--root", str(project), *argv])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and "Traceback" not in err, (code, err)
    return failed(err)


@pytest.mark.parametrize("out", ["/dev/null", "patches", "patches/upstream-tests", "vendor"])
def test_upstream_pr_checks_its_out_before_the_work(
    project: Path, capsys: pytest.CaptureFixture[str], out: str
) -> None:
    before = snapshot(project)
    target = out if out.startswith("/") else str(project / out)
    error = refused(capsys, project, "upstream-pr", fix_patch(project).name, "--out", target, "--skip-test-run")
    assert error.reference == OutputNotWritableError.reference, error
    assert error.message.startswith(f"--out {Path(target).resolve()}"), error
    assert snapshot(project) == before


def test_train_watch_checks_its_report_before_the_work(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    error = refused(capsys, project, "train", "watch", str(tmp_path / "scan.json"), "--report", str(a_file / "r.md"))
    assert error.reference == OutputNotWritableError.reference, error
    assert error.message.startswith(f"--report {a_file / 'r.md'}:") and "not a directory" in error.message, error


@pytest.mark.parametrize("scan", ["."])  # an empty path is a usage error: tests/unit/test_cli_edge_hostile.py
def test_train_watch_of_no_file_is_bad_input(project: Path, capsys: pytest.CaptureFixture[str], scan: str) -> None:
    error = refused(capsys, project, "train", "watch", scan)
    assert error.reference == BadInputError.reference and "is a directory, not a regular file" in error.message, error


def test_scan_checks_that_it_can_write_before_it_scans(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = Layout(project).affected_json.parent
    folder.chmod(0o555)
    try:
        error = refused(capsys, project, "scan", "--since", "0.20.0", "--until", "0.20.0")
    finally:
        folder.chmod(0o755)
    assert error.reference == OutputNotWritableError.reference, error
    assert "is not writable; nothing was scanned" in error.message, error
