"""A patch's paths, read in this process: one that leaves the subtree, cannot be read or is a link is
malformed (the file and the reason named), and a hunk line that looks like a header is a hunk line.

`check` and `rebase` on the same patches, as processes: tests/cli/test_check_hardening.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import REPO
from helpers.bad_patches import ESCAPES, spoiled
from helpers.synthetic import SUBTREE, patch_message
from release.core.errors import MalformedPatchError
from release.model.patch import Patch

PATCH_0001 = REPO / "patches" / "0001-flashinfer-nvlink-output-is-reduced.patch"


@pytest.mark.parametrize(("old", "new", "message"), ESCAPES)
def test_a_patch_path_that_leaves_the_subtree_is_malformed(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = tmp_path / PATCH_0001.name
    path.write_text(spoiled(PATCH_0001.read_text(), old, new))
    with pytest.raises(MalformedPatchError) as refused:
        Patch.load(path)
    assert message in str(refused.value) and PATCH_0001.name in str(refused.value)


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
