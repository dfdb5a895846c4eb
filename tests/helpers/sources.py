"""release/'s modules parsed once per process, for the hygiene and owner tests that read every one (an AST of
each: what a module imports, calls or opens), instead of each test parsing all of them again (1 s a pass)."""

from __future__ import annotations

import ast
from functools import cache

from helpers import REPO


@cache
def release_trees() -> tuple[tuple[str, ast.Module], ...]:
    """(path below the checkout, its AST) of every module of release/ but the runtime (release/overlay/runtime/),
    which ships in the wheel without release/ and is held to rules of its own."""
    root = REPO / "release"
    return tuple(
        (path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(root.rglob("*.py"))
        if "runtime" not in path.relative_to(root).parts
    )
