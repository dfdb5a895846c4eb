"""noxfile.py runs in nox's own interpreter, which the README's set-up gives nox and uv alone: it may
import the standard library and nox, nothing of release/ (whose modules need the tooling group:
tomli-w, packaging, pypi-simple...). An import of release/ there broke every nox command on a fresh
machine once (release.model.train came to import tomli_w)."""

from __future__ import annotations

import ast
import sys

from helpers import REPO

NOXFILE = REPO / "noxfile.py"


def imported_roots(source: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_noxfile_imports_only_the_standard_library_and_nox() -> None:
    foreign = imported_roots(NOXFILE.read_text(encoding="utf-8")) - set(sys.stdlib_module_names) - {"nox"}
    assert not foreign, f"noxfile.py imports {sorted(foreign)}, which nox's interpreter does not have"


def test_the_check_sees_an_import_of_release() -> None:
    assert imported_roots("from release.model.train import Train\nimport os\n") - set(sys.stdlib_module_names) == {
        "release"
    }
