"""One owner per fact (issue 39), as docs/architecture.md's "Who owns what" says it: each owner it
names defines what it owns. (That the two spellings of a fact agree where it must be written twice
is logic: tests/unit/test_owners.py.)"""

from __future__ import annotations

import importlib
import re

from release.core.layout import PROJECT_ROOT


def test_each_owner_the_architecture_page_names_defines_what_it_owns() -> None:
    """docs/architecture.md, "Who owns what": each row's module exists and defines every name it lists."""
    page = (PROJECT_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("\n## Who owns what\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`release/" in line]
    assert len(rows) >= 10
    runtime = "release/overlay/runtime/"
    for row in rows:
        _fact, owner, names = (cell.strip() for cell in row.strip("|").split(" | "))
        path = owner.strip("`")
        assert (PROJECT_ROOT / path).is_file(), row
        dotted = path.removeprefix(runtime) if path.startswith(runtime) else path
        module = importlib.import_module(dotted.removesuffix(".py").replace("/", "."))
        for name in re.findall(r"`([^`]+)`", names):
            assert hasattr(module, name), f"{path} defines no {name}"
