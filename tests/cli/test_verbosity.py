"""`-q` and `-v`: diagnostics on stderr go through one logger, the command's result on stdout stays.

Offline: a dry-run rebase onto the head's own pristine tree under the next version (a real `dir:`
source, tests/helpers/synthetic.py), and `check`, by the real CLI in a process. Before the logger
there were no such options (argparse refused them, exit 2) and every note was a bare print.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers import run_release
from helpers.failure import failed
from helpers.synthetic import NEXT_TAG, make_dir, next_tree
from release.core.errors import MalformedSeriesError


def dry_run(project: Path, tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """The same source for every run of a test (its path is in the report), a report directory of its own."""
    source = tmp_path / "src"
    if not source.exists():
        make_dir(source, next_tree(project), NEXT_TAG.removeprefix("v"))
    report = tmp_path / f"report-{'-'.join(options) or 'plain'}"
    return run_release(
        project, *options, "rebase", NEXT_TAG, "--from", f"dir:{source}", "--dry-run", "--report", str(report)
    )


@pytest.fixture
def plain(project: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    result = dry_run(project, tmp_path)
    assert result.returncode == 0, result.stderr
    return result


def markdown_without_paths(stdout: str) -> str:
    # The report names the directory it was written to; each run has its own temporary one.
    return "\n".join(line for line in stdout.splitlines() if "/report-" not in line)


def test_by_default_notes_go_to_stderr_and_the_report_to_stdout(plain: subprocess.CompletedProcess[str]) -> None:
    assert plain.stdout.startswith("# Rebase onto vLLM")
    assert "report: " in plain.stderr  # where the report went: a note, not the result
    assert "git " not in plain.stderr  # what runs underneath is for -v


@pytest.mark.parametrize("quiet", ["-q", "--quiet"])
def test_quiet_says_nothing_on_stderr_and_leaves_stdout_as_it_was(
    project: Path, tmp_path: Path, plain: subprocess.CompletedProcess[str], quiet: str
) -> None:
    result = dry_run(project, tmp_path, quiet)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert markdown_without_paths(result.stdout) == markdown_without_paths(plain.stdout)


@pytest.mark.parametrize("verbose", ["-v", "--verbose"])
def test_verbose_adds_each_git_command_to_the_notes(
    project: Path, tmp_path: Path, plain: subprocess.CompletedProcess[str], verbose: str
) -> None:
    result = dry_run(project, tmp_path, verbose)
    assert result.returncode == 0, result.stderr
    said = result.stderr.splitlines()
    assert any(line.startswith("git am ") for line in said), result.stderr  # the replay, patch by patch
    assert any(line.startswith("report: ") for line in said)  # the default notes are still there
    assert len(said) > len(plain.stderr.splitlines())
    assert markdown_without_paths(result.stdout) == markdown_without_paths(plain.stdout)


def test_quiet_keeps_the_error_and_hint_lines_of_a_failure(project: Path) -> None:
    (project / "patches" / "series").write_text("0099-missing.patch\n")
    result = run_release(project, "-q", "check")
    assert result.returncode == 2
    error = failed(result)
    assert error.reference == MalformedSeriesError.reference and error.hint, result.stderr
    assert len(result.stderr.splitlines()) == 2, result.stderr


def test_quiet_and_verbose_together_are_refused(project: Path) -> None:
    result = run_release(project, "-q", "-v", "check")
    assert result.returncode == 2 and "not allowed with argument" in result.stderr


def test_help_documents_both() -> None:
    result = run_release(Path("."), "--help")
    assert "-q, --quiet" in result.stdout and "-v, --verbose" in result.stdout
