"""A patch's paths, read in this process: one that leaves the subtree, cannot be read or is a link is
malformed (the file and the reason named), and a hunk line that looks like a header is a hunk line.

`check` and `rebase` refuse each such patch through `release.cli.main` here; as processes, one of them
in tests/cli/test_check_hardening.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import snapshot
from helpers.bad_patches import ESCAPES, spoiled
from helpers.failure import failed
from helpers.fix import fix_patch
from helpers.synthetic import SUBTREE, patch_message
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, MalformedPatchError
from release.model.patch import Patch
from release.model.pin import Pin

FIX = fix_patch()


@pytest.mark.parametrize(("old", "new", "message"), ESCAPES)
def test_a_patch_path_that_leaves_the_subtree_is_malformed(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = tmp_path / FIX.name
    path.write_text(spoiled(FIX.read_text(), old, new))
    with pytest.raises(MalformedPatchError) as refused:
        Patch.load(path)
    assert message in str(refused.value) and FIX.name in str(refused.value)


# A patch that removes the line `-- not a path`: in the mail that line reads `--- not a path`.
SUBJECT = "batched: drop the dashes again"
DASHES = f"""\
From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001
From: A Maintainer <maintainer@example.com>
Date: Thu, 1 Jan 2026 00:00:00 +0000
Subject: [PATCH] {SUBJECT}

{patch_message(SUBJECT).split(chr(10) * 2, 1)[1]}---
 {SUBTREE}/batched.py | 1 -
 1 file changed, 1 deletion(-)

diff --git a/{SUBTREE}/batched.py b/{SUBTREE}/batched.py
index 1111111..2222222 100644
--- a/{SUBTREE}/batched.py
+++ b/{SUBTREE}/batched.py
@@ -1,3 +1,2 @@
--- not a path
 import torch
 import os
--
2.43.0
"""


def test_a_removed_line_that_starts_like_a_header_is_not_a_path(tmp_path: Path) -> None:
    path = tmp_path / "0003-dashes.patch"
    path.write_text(DASHES)
    patch = Patch.load(path)
    assert patch.files == [f"{SUBTREE}/batched.py"]
    [hunk] = patch.hunks
    assert hunk.removed == ["-- not a path"] and hunk.added == []


@pytest.mark.parametrize(("old", "new", "message"), ESCAPES)
def test_check_and_rebase_refuse_such_a_patch_as_bad_input_and_change_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, message: str
) -> None:
    """The commands as `release.cli.main` runs them: the queue is refused as it loads, before git or a source."""
    patch = fix_patch(project)
    patch.write_text(spoiled(patch.read_text(), old, new))
    before = snapshot(project)
    head = Pin.load(project / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml").tag
    for command in (["check"], ["rebase", head, "--from", "pypi"]):
        assert main(["--root", str(project), *command]) == EXIT_BAD_INPUT, command
        said = capsys.readouterr()
        error = failed(said.err)
        assert error.reference == MalformedPatchError.reference and message in error.message, said.err
        assert len(said.err.splitlines()) == 1 + bool(error.hint) and said.out == "", said  # no traceback
    assert snapshot(project) == before
