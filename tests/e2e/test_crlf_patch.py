"""A patch with carriage returns is refused by every command that reads the queue, never rewritten.

The queue's bug fix (helpers/fix.py), saved with CRLF line ends (as an editor or a checkout with
`core.autocrlf` would), or with one CR in one hunk line: `check`, `rebase`, `train check` and
`upstream-pr` all exit 2 naming the file and the line, and no byte of the checkout changes.
(Before, `check` passed on it and `rebase` wrote it back with LF, without a word.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_release, snapshot, tag_facts, work_leftovers
from helpers.failure import failed
from helpers.fix import fix_patch
from release.core.errors import MalformedPatchError

pytestmark = pytest.mark.network  # a rebase may read the release wheel (cached) if it gets that far

FIX = fix_patch().name  # the queue's first bug fix (helpers/fix.py), whatever its name


def commands(tmp_path: Path) -> list[tuple[str, ...]]:
    head = tag_facts.head().tag
    return [
        ("check",),
        ("status",),
        ("rebase", tag_facts.other_than_head(), "--from", "pypi", "--allow-older", "--report", str(tmp_path / "r")),
        ("train", "check", head),
        ("upstream-pr", FIX, "--out", str(tmp_path / "pr")),
        ("build", "--allow-dirty", "--out", str(tmp_path / "dist")),
    ]


def first_added_line(data: bytes) -> int:
    """The number of the patch's first `+` line of a hunk (1-based)."""
    lines = data.split(b"\n")
    return next(i for i, line in enumerate(lines) if line.startswith(b"+") and not line.startswith(b"+++")) + 1


@pytest.mark.parametrize("where", ["every line", "one added line"])
def test_a_patch_with_carriage_returns_is_refused_everywhere(project: Path, tmp_path: Path, where: str) -> None:
    path = project / "patches" / FIX
    data = path.read_bytes()
    assert b"\r" not in data
    if where == "every line":
        spoiled, line = data.replace(b"\n", b"\r\n"), 1
    else:
        line = first_added_line(data)
        lines = data.split(b"\n")
        lines[line - 1] += b"\r"
        spoiled = b"\n".join(lines)
    path.write_bytes(spoiled)
    before = snapshot(project)
    for args in commands(tmp_path):
        result = run_release(project, *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        error = failed(result)
        assert error.reference == MalformedPatchError.reference and result.stderr.startswith("error["), result.stderr
        assert error.message.startswith(f"{FIX}: line {line} ends in CRLF; "), (args, error)
        assert error.hint and "Traceback" not in result.stderr
        assert snapshot(project) == before, args
        assert path.read_bytes() == spoiled
    assert work_leftovers(project) == []
    assert not (tmp_path / "report").exists() and not (tmp_path / "pr").exists() and not (tmp_path / "dist").exists()
