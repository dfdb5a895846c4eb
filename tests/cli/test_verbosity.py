"""`-q` and `-v`: diagnostics on stderr go through one logger, the command's result on stdout stays.

Offline: a dry-run rebase onto the head's own pristine tree under the next version (a real `dir:`
source, tests/helpers/synthetic.py), by the real CLI in a process. Before the logger there were no
such options (argparse refused them, exit 2) and every note was a bare print. What `-q` and `-v` do
without git or a source (a failure's lines under -q, the two together refused) is checked in one
process (tests/unit/test_verbosity.py), and that --help documents both by its snapshot.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers import run_release
from helpers.synthetic import NEXT_TAG, make_dir, next_tree


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
