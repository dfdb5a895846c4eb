"""Which regression test shows each bug, per release line: patches/upstream-tests/tests.toml and the patches' trailers.

A patch with a `Bug:` names its regression test: the path in vLLM's checkout in its
`Upstream-Test:` trailer, else patches/upstream-tests/tests.toml's `[tests]` entry (patches
already released, whose text must not change); its file is ours, under patches/upstream-tests/ at
that path. That test imports the head line's modules. A release line whose classes live in other
modules (patches/lines.toml) names its own test of the same bug in the `[lines.<line>]` table of
tests.toml, keyed by the common patch, so that a line that skips the patch still has the test
that proves the skip. A `Downstream:` patch needs none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.core.errors import MissingUpstreamTestError, SourceError
from release.core.files import resolves_inside
from release.core.hashing import sha256_hex
from release.core.layout import Layout
from release.core.parse import load_toml
from release.model.lines import HEAD_LINE
from release.model.patch import UPSTREAM_SUBTREE_PREFIX, Patch
from release.pristine import safe
from release.queue.load import PatchLoader, Queue


@dataclass(frozen=True)
class BugTest:
    """The regression test of one bug on one release line."""

    bug: str  # the `Bug:` id or URL
    title: str
    patch: str  # the common patch that fixes it (patches/series)
    line: str
    path: str  # the test's path in vLLM's checkout
    text: str

    @property
    def digest(self) -> str:
        return "sha256:" + sha256_hex(self.text.encode())


def upstream_tests_dir(layout: Layout) -> Path:
    return layout.patches / "upstream-tests"


def _index(layout: Layout) -> dict[str, Any]:
    index = upstream_tests_dir(layout) / "tests.toml"
    if not os.path.lexists(index):
        return {}
    if not resolves_inside(index, layout.root):
        raise MissingUpstreamTestError(f"{index} resolves to {index.resolve()}, outside the checkout")
    # release/core/files.py's reader: a FIFO or /dev/zero is refused at once, never read
    return load_toml(index, error=MissingUpstreamTestError)


def named_test(layout: Layout, patch: Patch, line: str = HEAD_LINE) -> str:
    """The test path of `patch`'s bug on `line`: tests.toml's `[lines.<line>]` entry for an older line, else
    the patch's `Upstream-Test:`, else tests.toml's `[tests]` entry, or ""."""
    data = _index(layout)
    tables: list[object] = []
    if line != HEAD_LINE:
        lines = data.get("lines", {})
        tables.append(lines.get(line, {}) if isinstance(lines, dict) else {})
    if patch.upstream_test and not (tables and isinstance(tables[0], dict) and patch.name in tables[0]):
        return patch.upstream_test
    tables.append(data.get("tests", {}))
    for table in tables:
        value = table.get(patch.name, "") if isinstance(table, dict) else ""
        if not isinstance(value, str):
            raise MissingUpstreamTestError(
                f"{upstream_tests_dir(layout) / 'tests.toml'}: the test of {patch.name} is not a string"
            )
        if value.strip():
            return value.strip()
    return ""


def upstream_test(layout: Layout, patch: Patch, line: str = HEAD_LINE) -> tuple[str, str] | None:
    """The regression test that goes with the patch: its path upstream and our copy's text; None: none is named."""
    path = named_test(layout, patch, line)
    if not path:
        return None
    where = upstream_tests_dir(layout)
    problem = safe.name_problem(path)
    if problem or not path.startswith("tests/") or not path.endswith(".py"):
        raise MissingUpstreamTestError(
            f"{patch.name}: its upstream test {path!r} is not a path under vLLM's tests/ ending in .py"
            + (f" ({problem})" if problem else "")
        )
    ours = where / path
    if not resolves_inside(where, layout.root) or not resolves_inside(ours, where):
        raise MissingUpstreamTestError(
            f"{patch.name}: its upstream test {path} resolves to {ours.resolve()}, outside {where}; "
            "a linked directory on the way is not followed out of the checkout",
            hint=f"keep the test as a regular file under {where}, with no link on the way",
        )
    try:
        text = safe.read_regular_file(ours, str(where)).decode("utf-8")
    except (SourceError, OSError, UnicodeDecodeError):
        raise MissingUpstreamTestError(
            f"{patch.name} names the upstream test {path}, but {ours} is not a readable UTF-8 file",
            hint=f"write the test at {ours.relative_to(layout.root) if ours.is_relative_to(layout.root) else ours}",
        ) from None
    if not text.strip() or "\r" in text or not text.endswith("\n"):
        raise MissingUpstreamTestError(f"{ours} is empty, holds a carriage return, or does not end in a newline")
    return path, text


def bug_patches(layout: Layout, queue: Queue | None = None, load: PatchLoader = Patch.load) -> list[Patch]:
    """The patches that fix a bug (a `Bug:` trailer): the series' in order, then patches/retired/'s (a retired
    patch is still replayed on the tags older than its upstream release, so its bug still needs proof).
    `queue` and `load`: the checkout as the command read it (release.queue.snapshot.Checkout.bug_tests)."""
    queue = queue if queue is not None else Queue.load(layout)
    found = [patch for patch in queue.patches if patch.purpose.bug]
    names = {patch.name for patch in found}
    retired = sorted(layout.retired.glob("*.patch")) if layout.retired.is_dir() else []
    found += [
        p for p in (load(path, (UPSTREAM_SUBTREE_PREFIX,)) for path in retired) if p.purpose.bug and p.name not in names
    ]
    return found


def untested(layout: Layout, patches: list[Patch]) -> list[str]:
    """The bug patches among `patches` that name no regression test, or one whose file is not there."""
    missing = []
    for patch in patches:
        if not patch.purpose.bug:
            continue
        try:
            found = upstream_test(layout, patch)
        except MissingUpstreamTestError:
            found = None
        if found is None:
            missing.append(patch.name)
    return missing


def refuse_untested(layout: Layout, patches: list[Patch], what: str) -> None:
    missing = untested(layout, patches)
    if missing:
        raise MissingUpstreamTestError(
            f"{what}: {', '.join(missing)} {'fixes a bug' if len(missing) == 1 else 'fix bugs'} "
            "but names no regression test",
            hint="write the test at patches/upstream-tests/tests/...py and name it in the patch's "
            "`Upstream-Test:` trailer (or in patches/upstream-tests/tests.toml); a `Downstream:` patch needs none",
        )


def bug_tests(layout: Layout, line: str, queue: Queue | None = None, load: PatchLoader = Patch.load) -> list[BugTest]:
    """Each bug of the queue with its regression test on `line`; a bug without one is refused."""
    found = []
    for patch in bug_patches(layout, queue, load):
        test = upstream_test(layout, patch, line)
        if test is None:
            refuse_untested(layout, [patch], f"no evidence on line {line}")
            continue
        purpose = patch.purpose
        found.append(BugTest(purpose.bug, purpose.title, patch.name, line, test[0], test[1]))
    return found
