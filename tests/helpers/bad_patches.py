"""Patch 0001 spoiled so that a path leaves the subtree, cannot be read, or is a link: each case is
(old text, new text, what the refusal says). tests/unit/test_patch_paths.py loads them in this
process, tests/cli/test_check_hardening.py runs `check` and `rebase` on them."""

from __future__ import annotations

import pytest

from helpers.synthetic import SUBTREE

INDEX_LINE = "the patch's first `index A..B 100644` line"  # blob ids differ per head tag: found, not written

ESCAPES = [
    pytest.param(f"a/{SUBTREE}/flashinfer_nvlink_one_sided.py b/{SUBTREE}/flashinfer_nvlink_one_sided.py",
                 f"a/{SUBTREE}/../../../../../../x.py b/{SUBTREE}/../../../../../../x.py", "outside", id="dotdot"),
    pytest.param(f"+++ b/{SUBTREE}/flashinfer_nvlink_one_sided.py",
                 f"+++ b/{SUBTREE}/../../../../../../x.py", "outside", id="plus-dotdot"),
    pytest.param(f"diff --git a/{SUBTREE}/flashinfer_nvlink_one_sided.py",
                 f'diff --git "a/{SUBTREE}/flashinfer_nvlink_one_sided.py"', "cannot read the paths", id="quoted"),
    pytest.param(INDEX_LINE, "120000", "no links", id="link-mode"),
]  # fmt: skip


def spoiled(text: str, old: str, new: str) -> str:
    """`text` (a patch) with `old` replaced by `new`; INDEX_LINE is the first `index` line, its mode replaced."""
    if old == INDEX_LINE:
        old = next(line for line in text.splitlines() if line.startswith("index ") and line.endswith(" 100644"))
        new = old.removesuffix("100644") + new
    assert old in text
    return text.replace(old, new)
