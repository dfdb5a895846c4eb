"""The rebase's options are made once and never change; its steps take one run object, not eight arguments.

Frozen, so that no step can rewrite a caller's object under it (the tag is made canonical once, when
the options are made), and one run object, so that a step's signature does not grow with each fact
a later step needs. The rebase itself, end to
end: tests/e2e/test_rebase.py, tests/cli/test_conflict_path.py and tests/cli/test_crash.py.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from helpers import REPO
from release.core.errors import BadInputError
from release.core.layout import Layout
from release.model.source import Source
from release.rebase import run
from release.rebase.run import RebaseOptions


def options(tag: str) -> RebaseOptions:
    return RebaseOptions(tag=tag, source=Source.parse("pypi"), layout=Layout(REPO))


@pytest.mark.parametrize("given", ["0.20.1", " v0.20.1 ", "v0.20.1"])
def test_the_tag_is_canonical_from_the_moment_the_options_are_made(given: str) -> None:
    made = options(given)
    assert made.tag == "v0.20.1"
    assert made.reports == REPO / "reports" / "rebase-v0.20.1"


def test_the_options_cannot_be_changed() -> None:
    made = options("v0.20.1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.tag = "v0.20.2"  # type: ignore[misc]


def test_a_tag_that_is_no_release_tag_is_refused_when_the_options_are_made() -> None:
    with pytest.raises(BadInputError):
        options("main")


def test_no_step_of_the_rebase_takes_more_than_three_arguments() -> None:
    """pip's vendoring passes one Configuration to each step; our steps take the run (and what is theirs)."""
    tree = ast.parse(Path(inspect.getfile(run)).read_text(encoding="utf-8"))
    long = {
        node.name: len(node.args.args) + len(node.args.kwonlyargs)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and len(node.args.args) + len(node.args.kwonlyargs) > 3
    }
    assert long == {}
