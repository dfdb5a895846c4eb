"""The CLI edge against hostile arguments and messages (issue 45), in process.

- An empty path argument is the working directory to `Path`, and a dangling link is created through:
  every command that takes a path refuses both as a usage error (exit 2) before any work.
- An error message quoting what came from outside (a commit subject with ESC and BEL, as `pq export
  --dir` prints) is printed with its control characters escaped.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from release.cli import main, report
from release.core.errors import BadInputError, DiskError

WHEEL = "vllm_fused_moe-0.20.0+fm.1-py3-none-any.whl"


@pytest.mark.parametrize(
    "argv",
    [
        ["publish", WHEEL, ""],
        ["publish", "", "index"],
        ["build", "--out", ""],
        ["rebase", "v0.21.0", "--report", ""],
        ["upstream-pr", "0001", "--out", ""],
        ["upstream-pr", ""],
        ["evidence", "--line", ""],
        ["evidence", "--tag", "", "--on", "x"],
        ["doctor", "--python", ""],
        ["pq", "export", "--dir", ""],
        ["--root", "", "check"],
        ["train", "watch", ""],
    ],
)
def test_an_empty_path_or_name_is_exit_2_before_any_work(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "an empty" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []  # nothing written where the empty path would have pointed


def test_a_dangling_link_as_index_dir_is_exit_2_and_its_target_is_never_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "index").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SystemExit) as exited:
        main(["publish", WHEEL, "index"])
    assert exited.value.code == 2 and "is a link to nothing" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists()


def test_an_error_quoting_a_commit_subject_prints_its_control_characters_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = report(BadInputError("commit 0123456789ab (\x1b[2Jred\x07\rerror: spoofed) changes nothing"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and not any(c in err for c in "\x1b\x07\r"), repr(err)
    assert "(\\x1b[2Jred\\x07\\rerror: spoofed)" in err


def test_a_full_tmpdir_is_named_in_the_hint_and_no_swap_is_spoken_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """publish with TMPDIR on a full disk: its hint spoke of "a swap cut short", which publish does not have.
    A double of the full disk (a disk cannot be filled without root): publish's stage raises the OSError a
    write into TMPDIR gets there, and the CLI edge says what to do."""
    from release.overlay import publish_cli

    def full(*_: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "evidence-x" / "venv"))

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(publish_cli, "publish_wheels", full)
    assert main(["publish", WHEEL, str(tmp_path / "index")]) == DiskError.exit_code
    err = capsys.readouterr().err
    assert "No space left on device" in err and f"the temporary directory {tmp_path} (TMPDIR) is full" in err, err
    assert "swap" not in err
