"""A bug fix of the queue (helpers/fix.py) spoiled so that a path leaves the subtree, cannot be read, or is a
link: each case is (old text, new text, what the refusal says). tests/unit/test_patch_paths.py loads them and runs
`check` and `rebase` on them in this process, tests/cli/test_check_hardening.py one of them as processes."""

from __future__ import annotations

import pytest

from helpers.synthetic import SUBTREE
from release.model.patch import DIFF_FILE_RE

INDEX_LINE = "the patch's first `index A..B 100644` line"  # blob ids differ per head tag: found, not written
END = "the patch's end"  # `new` is appended after the last hunk
WHY = "\nWhy: "  # the message's first section: `new` goes before it, inside the message
# Stands for the upstream path of the first file the patch changes (found, not written: any patch will do).
FILE = "\0first file\0"


def traditional(path: str) -> str:
    """A traditional (no `diff --git`) section that creates `path`: git applies it wherever it stands."""
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+print('outside')\n"


ESCAPES = [
    pytest.param(f"a/{FILE} b/{FILE}",
                 f"a/{SUBTREE}/../../../../../../x.py b/{SUBTREE}/../../../../../../x.py", "outside", id="dotdot"),
    pytest.param(f"+++ b/{FILE}",
                 f"+++ b/{SUBTREE}/../../../../../../x.py", "outside", id="plus-dotdot"),
    pytest.param(f"diff --git a/{FILE}",
                 f'diff --git "a/{FILE}"', "cannot read the paths", id="quoted"),
    pytest.param(INDEX_LINE, "120000", "no links", id="link-mode"),
    pytest.param(END, traditional("vllm/audit_outside.py"), "without `diff --git`", id="trailing-section"),
    pytest.param(END, traditional("AUDIT_ROOT.py"), "without `diff --git`", id="trailing-section-root"),
    pytest.param(END, traditional(".git/hooks/post-checkout"), "without `diff --git`", id="trailing-git-hook"),
    pytest.param(END, traditional("../x.py"), "without `diff --git`", id="trailing-dotdot"),
    pytest.param(END, traditional(f"{SUBTREE}/inside.py"), "without `diff --git`", id="trailing-inside"),
    pytest.param(WHY, "\n" + traditional(".github/workflows/pwn.yml"), "without `diff --git`", id="message-section"),
    pytest.param(f"+++ b/{FILE}",
                 f"+++ b/{SUBTREE}/.git/x.py", "outside", id="plus-dot-git"),
    pytest.param("\nOrigin: ", "\nVaries: ../../../../tmp/x/leak.patch\nOrigin: ", "Varies:", id="varies-dotdot"),
    pytest.param("\nSubject: ", "\nSubject: \x1b[31m", "control character U+001B", id="subject-esc"),
    pytest.param("\nRisk: ", "\nRisk: \x1b]0;owned\x07", "control character U+001B", id="trailer-esc"),
    pytest.param("\nRisk: ", "\nRisk: \u2028", "control character U+2028", id="trailer-line-separator"),
    pytest.param("\nOrigin: ", "\nVaries: /etc/leak.patch\nOrigin: ", "Varies:", id="varies-absolute"),
]  # fmt: skip


def spoiled(text: str, old: str, new: str) -> str:
    """`text` (a patch) with `old` replaced by `new`; INDEX_LINE is the first `index` line, its mode replaced;
    FILE, in either, the first file the patch changes."""
    first = DIFF_FILE_RE.search(text)
    assert first is not None, "not a patch: no `diff --git` line"
    old, new = old.replace(FILE, first["a"]), new.replace(FILE, first["a"])
    if old == END:
        return text + ("" if text.endswith("\n") else "\n") + new
    if old == INDEX_LINE:
        old = next(line for line in text.splitlines() if line.startswith("index ") and line.endswith(" 100644"))
        new = old.removesuffix("100644") + new
    assert old in text
    return text.replace(old, new, 1)
