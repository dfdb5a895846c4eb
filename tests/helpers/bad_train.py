"""Train files the tool would never write, each made from the real one by one hand edit, and what
every reader must say about it (tests/unit/test_train_model.py in-process, tests/e2e/test_train.py
through every command that reads the train)."""

from __future__ import annotations

import re


def _last_entry(text: str) -> tuple[int, str, str]:
    """Where the last [[release]] starts, its text and its tag."""
    start = text.rindex("[[release]]")
    tag = re.search(r'^tag = "([^"]+)"$', text[start:], re.M)
    assert tag is not None
    return start, text[start:], tag.group(1)


def _bare_beside(text: str) -> str:
    # The newest tag again, as "0.21.0" beside "v0.21.0": two entries for one release.
    _start, entry, tag = _last_entry(text)
    return text + "\n" + entry.replace(f'tag = "{tag}"', f'tag = "{tag[1:]}"')


def _bare(text: str) -> str:
    start, entry, tag = _last_entry(text)
    return text[:start] + entry.replace(f'tag = "{tag}"', f'tag = "{tag[1:]}"')


def _newline(text: str) -> str:
    start, entry, tag = _last_entry(text)
    return text[:start] + entry.replace(f'tag = "{tag}"', f'tag = "{tag}\\n"')


def _unknown_line(text: str) -> str:
    start, entry, _tag = _last_entry(text)
    return text[:start] + re.sub(r'^line = "[^"]*"$', 'line = "no_such_line"', entry, count=1, flags=re.M)


def _control_in_source(text: str) -> str:
    start, entry, _tag = _last_entry(text)
    return text[:start] + re.sub(r'^source = "([^"]*)"$', r'source = "\1\\u0007"', entry, count=1, flags=re.M)


def _unknown_key(text: str) -> str:
    start, entry, _tag = _last_entry(text)
    return text[:start] + entry.replace("[[release]]\n", '[[release]]\nlien = "flashinfer_nvlink"\n', 1)


BAD_TRAIN = {
    f.__name__.lstrip("_"): f for f in (_bare_beside, _bare, _newline, _unknown_line, _control_in_source, _unknown_key)
}
SAYS = {
    "bare_beside": "is listed twice: release #",
    "bare": "must be written 'v",
    "newline": "holds a control character",
    "unknown_line": "line 'no_such_line' is not a release line of patches/lines.toml (lines: ",
    "control_in_source": "`source` ",
    "unknown_key": "unknown key 'lien'",
}
