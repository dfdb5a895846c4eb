"""Every repository path that the docs, docstrings and comments name exists.

A file moves (a test module into tests/helpers/) and the prose that sends a reader to it stays
behind; nothing else notices. Here every path under one of the checkout's top-level folders
(`release/`, `tests/`, `docs/`, `patches/`, `vendor/`, `benchmarks/`, `.github/`, `.ci/`) named in
a Markdown file, a module, class or function docstring, or a `#` comment of a Python or TOML file
must exist in the checkout. A path with a placeholder in it (`patches/NNNN-slug.patch`,
`benchmarks/NAME.py`) or a glob (`flashinfer_nvlink_*.py`, `{two,one}`) is a pattern, not a
path; the few paths that name what a documented step creates are listed in CREATED, with why.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from helpers import REPO

ROOTS = ("release", "tests", "docs", "patches", "vendor", "benchmarks", ".github", ".ci")
PATH_RE = re.compile(r"(?<![\w./-])((?:" + "|".join(map(re.escape, ROOTS)) + r")/[\w./-]*[\w/])(?P<after>.?)")
PLACEHOLDER_RE = re.compile(r"[A-Z]{2,}|<")
GLOB_AFTER = set("*{<[")
# Paths a documented step writes, so that a checkout need not hold them.
CREATED = {
    "patches/retired/": "the first retirement creates it (rebase onto a release that has a patch's change)",
    "patches/0002-shape-check.patch": "the patch docs/maintainers.md and docs/patch-queue.md add as their example",
}
SKIPPED_DIRS = {".git", ".nox", ".work", "reports", "dist", "index", "build", ".venv", "__pycache__"}


def files(suffix: str) -> Iterator[Path]:
    """The checkout's files ending in `suffix`, outside build outputs and the vendored code (theirs)."""
    for top, dirs, names in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and Path(top, d) != REPO / "vendor")
        yield from (Path(top, name) for name in sorted(names) if name.endswith(suffix))


# The fields that hold statements: a docstring's owner (a module, class or function) is a statement
# or the module, so the walk never enters an expression, most of a file's nodes.
STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


Owner = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def docstring_owners(tree: ast.Module) -> Iterator[Owner]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Owner):
            yield node
        for field in STATEMENT_LISTS:
            children = getattr(node, field, None)
            if isinstance(children, list):
                stack.extend(child for child in children if isinstance(child, ast.AST))


def may_comment_on_a_path(text: str) -> bool:
    """Whether some line names a path after its first `#`: a comment is a line's tail from a `#` on."""
    return any(PATH_RE.search(line, line.index("#")) for line in text.splitlines() if "#" in line)


def python_prose(path: Path) -> Iterator[str]:
    """The docstrings and comments of one Python file (the comments only where one may name a path)."""
    text = path.read_text(encoding="utf-8")
    for node in docstring_owners(ast.parse(text)):
        docstring = ast.get_docstring(node, clean=False)
        if docstring:
            yield docstring
    if may_comment_on_a_path(text):
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                yield token.string


def toml_comments(path: Path) -> Iterator[str]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if "#" in line:
            yield line[line.index("#") :]


def prose() -> Iterator[tuple[Path, str]]:
    for path in files(".md"):
        yield path, path.read_text(encoding="utf-8")
    for path in files(".py"):
        for text in python_prose(path):
            yield path, text
    for path in files(".toml"):
        for text in toml_comments(path):
            yield path, text


def named_paths(text: str) -> Iterator[str]:
    for match in PATH_RE.finditer(text):
        path = match.group(1).rstrip(".")
        if match.group("after") in GLOB_AFTER or PLACEHOLDER_RE.search(path):
            continue
        yield path


def test_the_reader_finds_paths_and_leaves_patterns_alone() -> None:
    text = "see tests/helpers/synthetic.py, `benchmarks/NAME.py`, docs/a_*.md and (release/core/)."
    assert list(named_paths(text)) == ["tests/helpers/synthetic.py", "release/core/"]


def test_the_python_reader_finds_every_docstring_and_each_comment_that_may_name_a_path(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        '"""docs/a.md"""\n'
        "class A:\n"
        "    if True:\n"
        "        try:\n"
        "            pass\n"
        "        finally:\n"
        "            def f():\n"
        '                """docs/b.md"""  \n'
        "x = 1  # docs/c.md\n"
        "y = '#'  # no path here\n",
        encoding="utf-8",
    )
    found = [path for text in python_prose(source) for path in named_paths(text)]
    assert found == ["docs/a.md", "docs/b.md", "docs/c.md"]
    assert not may_comment_on_a_path("y = '#'  # no path here\n")


def test_every_path_the_docs_docstrings_and_comments_name_exists() -> None:
    missing: dict[str, set[str]] = {}
    for where, text in prose():
        for path in named_paths(text):
            if path not in CREATED and not (REPO / path).exists():
                missing.setdefault(path, set()).add(where.relative_to(REPO).as_posix())
    assert not missing, "paths that do not exist:\n" + "\n".join(
        f"  {path}, named in {', '.join(sorted(where))}" for path, where in sorted(missing.items())
    )
