"""What a carried variant's `Carried-From:` pins of its common patch: what the patch says and changes.

`rebase` refreshes a patch whose context moved upstream (new hunk headers, context and `index` lines);
the variants carried from it before the refresh still carry the same change and must not turn stale,
while any edit of the message or of a removed or added line must.
"""

from __future__ import annotations

import re

from helpers.fix import fix_patch
from release.model.patch import Patch
from release.queue.gates import fingerprint

PATCH = Patch.load(fix_patch())


def edited(old: str, new: str, count: int = 1) -> Patch:
    assert old in PATCH.text
    return Patch(PATCH.name, PATCH.text.replace(old, new, count))


def refreshed() -> Patch:
    """The patch as a rebase leaves it when upstream moved its context: other blobs, line numbers and context."""
    text = re.sub(r"(?m)^index [0-9a-f]+\.\.[0-9a-f]+", "index " + "1" * 40 + ".." + "2" * 40, PATCH.text)
    text = re.sub(r"(?m)^@@ -(\d+),(\d+) \+(\d+),(\d+) @@", lambda m: f"@@ -{int(m[1]) + 9},{m[2]} +"
                  f"{int(m[3]) + 9},{m[4]} @@", text)  # fmt: skip
    first_context = next(line for line in PATCH.hunks[0].lines if line.startswith(" "))
    return Patch(PATCH.name, text.replace(f"\n{first_context}\n", f"\n {first_context[1:]}  # moved\n", 1))


def test_a_refresh_keeps_the_fingerprint() -> None:
    moved = refreshed()
    assert moved.text != PATCH.text
    assert [h.header for h in moved.hunks] != [h.header for h in PATCH.hunks]
    assert fingerprint(moved) == fingerprint(PATCH)


def test_a_changed_line_or_message_changes_it() -> None:
    added = next(line for line in PATCH.hunks[0].lines if line.startswith("+"))
    removed = next(line for line in PATCH.hunks[0].lines if line.startswith("-"))
    assert fingerprint(edited(f"\n{added}\n", f"\n{added} # edited\n")) != fingerprint(PATCH)
    assert fingerprint(edited(f"\n{removed}\n", f"\n{removed}  \n")) != fingerprint(PATCH)
    assert fingerprint(edited("\nHow: ", "\nHow: indeed, ")) != fingerprint(PATCH)
