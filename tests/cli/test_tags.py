"""The `tags` command as a process: against a real local git remote (`git ls-remote --tags`),
a recorded listing with the checkout's pin, and a remote that is not there. The parsing and the
choice of the newest release are tested in-process in tests/unit/test_tags.py, a pin that is no
release in tests/unit/test_cli_main.py."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import run_release
from helpers.failure import failed
from helpers.ls_remote import LS_REMOTE
from release.core.errors import RemoteError
from release.model.pin import Pin


def git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    repo = tmp_path / "vllm-remote"
    repo.mkdir()
    git(repo, "init", "--quiet")
    for number, tag in enumerate(["v0.20.0", "0.20.0-1", "v0.21.0rc1", "v0.21.0", "0.21.0-1", "v0.22.0rc1"]):
        git(repo, "commit", "--quiet", "--allow-empty", "-m", f"commit {number}")
        if number % 2:
            git(repo, "tag", tag)  # lightweight
        else:
            git(repo, "tag", "-a", tag, "-m", tag)  # annotated: ls-remote adds a peeled ^{} line
    return repo


def test_tags_command_lists_newer_releases_from_a_real_remote(project: Path, remote: Path) -> None:
    # Without --pin the command compares with UPSTREAM.toml: pin the copy at the remote's first release.
    pin_file = project / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml"
    pin_file.write_text(replace(Pin.load(pin_file), tag="v0.20.0").dumps())
    result = run_release(project, "tags", "--remote", str(remote))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["v0.21.0"]
    newest = run_release(project, "tags", "--remote", str(remote), "--newest", "--pin", "v0.19.0")
    assert newest.returncode == 0 and newest.stdout == "v0.21.0\n"
    none = run_release(project, "tags", "--remote", str(remote), "--newest", "--pin", "v0.21.0")
    assert none.returncode == 0 and none.stdout == ""


def test_tags_command_reads_a_recorded_listing_and_an_unreachable_remote_exits_4(project: Path, tmp_path: Path) -> None:
    recorded = tmp_path / "ls-remote.txt"
    recorded.write_text(LS_REMOTE)
    assert run_release(project, "tags", "--ls-remote-output", str(recorded), "--newest").stdout == "v0.22.0\n"
    missing = run_release(project, "tags", "--remote", str(tmp_path / "no-such-repo"))
    # A remote that cannot be listed is the transport's failure: exit 4, as from every command that reads one.
    assert missing.returncode == 4 and failed(missing).reference == RemoteError.reference, missing.stderr
    assert missing.stdout == ""
