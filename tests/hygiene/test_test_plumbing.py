"""What the test suites share is written once, in tests/helpers/ (issue 39, "Tests").

The checkout's root is `helpers.REPO`: a module that works it out from its own `__file__` again
points at tests/ once it moves a folder deeper. tests/kernel/'s scripts and tests/contract/moe_contract/
are the exceptions: they also run outside pytest (on a GPU box, in a contract rank's interpreter),
where `helpers` is not importable.
"""

from __future__ import annotations

import re

from helpers import REPO

# Path(__file__).parents[N], .resolve().parents[N], .parent.parent: a root found from where a file stands.
ROOT_FROM_FILE = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.(?:parents\[\d+\]|parent\.parent)")
RUN_OUTSIDE_PYTEST = ("tests/kernel/", "tests/contract/moe_contract/")
THIS = "tests/hygiene/test_test_plumbing.py"  # its examples above are strings


def finds_the_root_itself(text: str) -> bool:
    return ROOT_FROM_FILE.search(text) is not None


def test_the_pattern_finds_each_way_of_climbing_from_a_file() -> None:
    for text in (
        "REPO = Path(__file__).resolve().parents[2]",
        'DOC = Path(__file__).parents[1] / "docs"',
        "ROOT = Path(__file__).parent.parent",
    ):
        assert finds_the_root_itself(text), text
    assert not finds_the_root_itself('SCRIPT = Path(__file__).with_name("probe.py")')
    assert not finds_the_root_itself("HERE = Path(__file__).resolve().parent")


def test_only_helpers_finds_the_checkout_from_a_file() -> None:
    climbing = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        if name in ("tests/helpers/__init__.py", THIS) or name.startswith(RUN_OUTSIDE_PYTEST):
            continue
        if finds_the_root_itself(path.read_text(encoding="utf-8")):
            climbing.append(name)
    assert climbing == [], f"import REPO from helpers instead: {climbing}"
