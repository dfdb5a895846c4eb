"""How a commit of the work tree keeps its patch's file name: the `Patch-Name:` line, and new names.

Import adds `Patch-Name: NNNN-slug.patch` as the last line of each commit's message and export
strips it from the mail again, byte for byte (gbp keeps `Gbp-Pq: Name` the same way). A commit
without one takes the name of the old patch with its subject, or else a new name: the next
number no patch has used (in patches/, patches/retired/ or a line's folder) and a slug of its
subject. The order of the queue lives in patches/series, so a patch keeps its number when it
moves: a number names a patch, it does not sort the queue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from release.model.patch import PATCH_NAME_RE

NAME_TRAILER = "Patch-Name"
NAME_RE = PATCH_NAME_RE  # release/model/patch.py owns the rule for a patch's name
SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
NAME_LINE_RE = re.compile(rf"^{NAME_TRAILER}:[ \t]*(?P<name>\S*)[ \t]*$")
# The message of a mail: after its headers, up to the diff (format-patch writes "---" only with a stat).
_MESSAGE_END_RE = re.compile(r"^(?:---\n|diff --git )", re.M)
SLUG_LENGTH = 52


def _message_span(text: str) -> tuple[int, int]:
    start = text.index("\n\n") + 2 if "\n\n" in text else len(text)
    end = _MESSAGE_END_RE.search(text, start)
    return start, end.start() if end else len(text)


def mark(text: str, name: str) -> str:
    """The mail with `Patch-Name: name` as the last line of its message (its trailer block)."""
    start, end = _message_span(text)
    region = text[start:end]
    body = region.rstrip("\n")
    trailing = region[len(body) :] or "\n"
    line = f"{NAME_TRAILER}: {name}"
    return text[:start] + (f"{body}\n{line}" if body else line) + trailing + text[end:]


def unmark(text: str) -> tuple[list[str], str]:
    """The names every `Patch-Name:` line of the mail's message gives, and the mail without those lines.

    A line that was a paragraph of its own goes with the blank line before it, so that `mark`
    then `unmark` gives back the very bytes `mark` was given.
    """
    start, end = _message_span(text)
    lines = text[start:end].split("\n")
    names: list[str] = []
    kept: list[str] = []
    for index, line in enumerate(lines):
        match = NAME_LINE_RE.match(line)
        if not match:
            kept.append(line)
            continue
        names.append(match.group("name"))
        if kept and kept[-1] == "" and (index + 1 >= len(lines) or lines[index + 1] == ""):
            kept.pop()
    return names, text[:start] + "\n".join(kept) + text[end:]


def slug_of(subject: str) -> str:
    """A file-name slug of a subject: its lowercase words joined by '-', at most SLUG_LENGTH characters."""
    slug = ""
    for word in re.findall(r"[a-z0-9]+", subject.lower()):
        if slug and len(slug) + 1 + len(word) > SLUG_LENGTH:
            break
        slug = f"{slug}-{word}" if slug else word[:SLUG_LENGTH]
    return slug or "patch"


def number_of(name: str) -> int | None:
    match = NAME_RE.match(name)
    return int(match.group("number")) if match else None


def next_number(used: Iterable[str]) -> int:
    """One above the highest number any of `used` carries (a retired or a line's number is never reused)."""
    return max((n for n in map(number_of, used) if n is not None), default=0) + 1


def new_name(slug: str, used: Iterable[str]) -> str:
    return f"{next_number(used):04d}-{slug}.patch"
