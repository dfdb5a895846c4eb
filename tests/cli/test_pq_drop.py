"""`pq drop NAME`: a patch out of the queue in one command, offline, as real processes with real git.

The patches are a test's own (helpers/synthetic.add_patch: a format-patch mail, its series line, vendor/
patched, a `skip` in every older line's series); dropping one gives back patches/ and vendor/ byte for byte
as they were before it was added, `skip`s included. A patch that a later one needs is not dropped (exit 3)
and nothing changes.
"""

from __future__ import annotations

import re
from pathlib import Path

from helpers import run_release, snapshot
from helpers.synthetic import add_patch

FIRST = "0002-mori-first.patch"
SECOND = "0003-mori-second.patch"


def test_drop_gives_back_the_queue_as_it_was_before_the_patch(project: Path) -> None:
    before = snapshot(project)
    add_patch(project, FIRST, "mori.py", "import torch\n", "import torch  # first\n", "mori: first")
    assert snapshot(project) != before
    dropped = run_release(project, "pq", "drop", "0002")
    assert dropped.returncode == 0, dropped.stderr
    assert re.search(rf"(?m)^{re.escape(FIRST)} +dropped$", dropped.stdout), dropped.stdout
    assert snapshot(project) == before
    again = run_release(project, "pq", "drop", FIRST)
    assert again.returncode == 2 and "is not one patch of the work tree" in again.stderr, again.stderr


def test_a_patch_a_later_one_needs_is_not_dropped_and_nothing_changes(project: Path) -> None:
    add_patch(project, FIRST, "mori.py", "import torch\n", "import torch  # first\n", "mori: first")
    add_patch(project, SECOND, "mori.py", "import torch  # first\n", "import torch  # second\n", "mori: second")
    assert run_release(project, "pq", "import").returncode == 0
    before = snapshot(project)
    refused = run_release(project, "pq", "drop", FIRST)
    assert refused.returncode == 3, refused.stderr
    assert refused.stderr.startswith(f"error: dropping {FIRST}: a later patch (mori: second) does not apply"), (
        refused.stderr
    )
    assert snapshot(project) == before
    assert run_release(project, "pq", "export", "--check").returncode == 0  # the work tree is as it was
