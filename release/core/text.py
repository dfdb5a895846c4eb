"""The one set of control characters the tool refuses in what it records or prints: a name, a line, a value.

C0 (tab and LF included: callers that take a tab, as a series line does, say so), DEL, C1 (U+0080 to
U+009F, which terminals read as escapes too) and the Unicode line and paragraph separators (which
`str.splitlines()` and editors take for line ends). A wheel member name, a series line, a patch's
subject and trailers and train.toml's values are checked against this set, so what the tool writes
it can read back, and what it prints cannot move the cursor or recolour the terminal.
"""

from __future__ import annotations

import re

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# The longest file name component most file systems take (ext4, xfs, btrfs, APFS): 255 bytes.
MAX_COMPONENT_BYTES = 255


def control_character(text: str, allow: str = "") -> str | None:
    """The first control character of `text` that `allow` does not take, or None."""
    for found in CONTROL_RE.finditer(text):
        if found.group() not in allow:
            return found.group()
    return None


def described(char: str) -> str:
    """`char` as a message names it: U+001B."""
    return f"U+{ord(char):04X}"


def escaped(text: str, keep: str = "") -> str:
    """`text` with each control character but those of `keep` written as its escape (`\\x1b`, `\\r`,
    `\\u2028`): printed, it cannot move the cursor, recolour the terminal or start a line of its own.

    For what the tool prints that came from outside (a commit subject, an index, a URL, a child's output).
    The runtime's doctor restates it (its _doctor/reading.py), as it ships without `release/`."""

    def escape(found: re.Match[str]) -> str:
        char = found.group()
        if char in keep:
            return char
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or (
            f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
        )

    return CONTROL_RE.sub(escape, text)
