"""`python -m release.overlay.py310 DIR`: every module of DIR would import under Python 3.10.

A lint tool of the overlay stage, which ships runtime/ (`nox -s lint` runs it on runtime/); no module
imports it.

The import hook runs in users' interpreters, and vLLM supports Python 3.10; the tooling itself
needs 3.11. Two checks, both static (no 3.10 interpreter needed):
- grammar: `ast.parse(feature_version=(3, 10))` rejects `except*`, but lets PEP 646's
  star-unpacking through (`tuple[*Ts]`, `*args: *Ts`), so that is looked for in the tree;
- names: a grammar cannot see that `tomllib` or `typing.Self` are newer than 3.10, so imports of
  those are rejected where they run at import time. An import inside a function runs only when
  the function does; one under `if TYPE_CHECKING:`, `if sys.version_info >= (3, 11):` or in a
  `try:` that catches ImportError is guarded.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from release.core import log

# vLLM's own vendored files follow vLLM's rules, not ours.
SKIP = ("prepare_finalize", "upstream")
OLDEST = (3, 10)
# Standard-library modules newer than OLDEST, and the version that added them.
NEWER_MODULES = {"tomllib": (3, 11), "wsgiref.types": (3, 11)}
# Names added to `typing` after OLDEST (annotations-only names are fine under TYPE_CHECKING).
NEWER_TYPING = {
    **dict.fromkeys(("Self", "LiteralString", "Never", "NotRequired", "Required", "TypeVarTuple", "Unpack"), (3, 11)),
    **dict.fromkeys(("assert_never", "assert_type", "reveal_type", "dataclass_transform", "get_overloads"), (3, 11)),
    **dict.fromkeys(("override", "TypeAliasType"), (3, 12)),
    **dict.fromkeys(("ReadOnly", "TypeIs", "NoDefault", "get_protocol_members", "is_protocol"), (3, 13)),
}
IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")


def check(directory: Path) -> list[str]:
    problems = []
    for path in sorted(directory.rglob("*.py")):
        if any(part in SKIP for part in path.relative_to(directory).parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=OLDEST)
        except SyntaxError as exc:
            problems.append(f"{path}:{exc.lineno}: not Python 3.10 syntax: {exc.msg}")
            continue
        problems += [f"{path}:{line}: not Python 3.10 syntax: {what}" for line, what in star_unpacking(tree)]
        problems += [f"{path}:{line}: {what}" for line, what in newer_imports(tree.body)]
    return problems


def star_unpacking(tree: ast.Module) -> list[tuple[int, str]]:
    """PEP 646 (3.11): `*` inside a subscript or on a `*args` annotation."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if any(isinstance(item, ast.Starred) for item in items):
                found.append((node.lineno, "star-unpacking in a subscript (PEP 646)"))
        elif isinstance(node, ast.arg) and isinstance(node.annotation, ast.Starred):
            found.append((node.lineno, "star-unpacking in an annotation (PEP 646)"))
    return found


def newer_imports(body: list[ast.stmt]) -> list[tuple[int, str]]:
    """(line, what) for each import of a post-3.10 name that runs when the module is imported."""
    found: list[tuple[int, str]] = []
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            found += [(stmt.lineno, what) for what in _newer_names(stmt)]
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue  # runs when called, not when imported
        elif isinstance(stmt, ast.If):
            if not _is_guard(stmt.test):
                found += newer_imports(stmt.body)
            found += newer_imports(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            if not any(_catches_import_error(handler) for handler in stmt.handlers):
                found += newer_imports(stmt.body)
            for handler in stmt.handlers:
                found += newer_imports(handler.body)
            found += newer_imports(stmt.orelse) + newer_imports(stmt.finalbody)
        elif isinstance(stmt, ast.ClassDef | ast.With | ast.For | ast.While):
            found += newer_imports(stmt.body)
            found += newer_imports(getattr(stmt, "orelse", []))
    return found


def _newer_names(stmt: ast.Import | ast.ImportFrom) -> list[str]:
    def why(name: str, added: tuple[int, int]) -> str:
        return f"imports {name} (Python {added[0]}.{added[1]}+) at import time; Python 3.10 fails there"

    if isinstance(stmt, ast.Import):
        return [why(alias.name, NEWER_MODULES[alias.name]) for alias in stmt.names if alias.name in NEWER_MODULES]
    if stmt.level or stmt.module is None:
        return []
    if stmt.module in NEWER_MODULES:
        return [why(stmt.module, NEWER_MODULES[stmt.module])]
    if stmt.module == "typing":
        return [why(f"typing.{a.name}", NEWER_TYPING[a.name]) for a in stmt.names if a.name in NEWER_TYPING]
    return [
        why(f"{stmt.module}.{a.name}", NEWER_MODULES[f"{stmt.module}.{a.name}"])
        for a in stmt.names
        if f"{stmt.module}.{a.name}" in NEWER_MODULES
    ]


def _is_guard(test: ast.expr) -> bool:
    """`TYPE_CHECKING`, `typing.TYPE_CHECKING`, or `sys.version_info >= (3, N)` with N > 10."""
    if isinstance(test, ast.Name | ast.Attribute):
        return (test.id if isinstance(test, ast.Name) else test.attr) == "TYPE_CHECKING"
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.GtE | ast.Gt)
        and ast.unparse(test.left) == "sys.version_info"
    ):
        try:
            bound = ast.literal_eval(test.comparators[0])
        except ValueError:
            return False
        # (3, 10, 5) is no guard: a 3.10 interpreter reaches it.
        return isinstance(bound, tuple) and tuple(bound[:2]) > OLDEST
    return False


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(ast.unparse(name).split(".")[-1] in IMPORT_ERRORS for name in caught)


def main(argv: list[str]) -> int:
    problems = [line for arg in argv for line in check(Path(arg))]
    log.out("\n".join(problems) if problems else f"Python 3.10: ok ({', '.join(argv)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
