"""The hook modules must import under Python 3.10 (vLLM supports it); the tooling is 3.11+.

`release.overlay.py310` checks it statically (nox -s lint runs it); these tests prove the check
catches what it claims to. tests/cli/test_py310.py runs it as a command, and imports the real hook
modules in an interpreter without the 3.11-only `tomllib`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from release.core.layout import Layout
from release.overlay.py310 import check

# Our code of the wheel's top level: the .pth's module and the package (nox -s lint checks the same).
RUNTIME = Layout.default().runtime


def _problems(tmp_path: Path, source: str) -> list[str]:
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    return check(tmp_path)


def test_the_hook_modules_pass() -> None:
    assert check(RUNTIME) == []


@pytest.mark.parametrize(
    "source",
    [
        "try:\n    pass\nexcept* ValueError:\n    pass\n",  # PEP 654
        # PEP 646: ast.parse(feature_version=(3, 10)) lets these through; the checker must not.
        "def f(*args: *tuple[int, ...]) -> None: ...\n",
        "x: tuple[*Ts]\n",
        "y = a[1, *b]\n",
    ],
    ids=["except-star", "star-annotation", "star-subscript", "star-in-tuple-subscript"],
)
def test_rejects_3_11_syntax(tmp_path: Path, source: str) -> None:
    [problem] = _problems(tmp_path, source)
    assert "not Python 3.10 syntax" in problem


@pytest.mark.parametrize(
    "source",
    [
        "import tomllib\n",
        "from tomllib import loads\n",
        "from typing import Self\n",
        "import sys\nif sys.platform == 'linux':\n    import tomllib\n",
        "class C:\n    import tomllib\n",
        "if sys.version_info >= (3, 10, 5):\n    import tomllib\n",  # 3.10.5 gets there
        "try:\n    import tomllib\nexcept KeyError:\n    pass\n",  # not an import guard
    ],
)
def test_rejects_newer_imports_at_import_time(tmp_path: Path, source: str) -> None:
    [problem] = _problems(tmp_path, source)
    assert "Python 3.1" in problem and "at import time" in problem


@pytest.mark.parametrize(
    "source",
    [
        "def load():\n    import tomllib\n    return tomllib\n",  # _meta.py's way: runs only when called
        "import sys\nif sys.version_info >= (3, 11):\n    import tomllib\n",
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from typing import Self\n",
        "try:\n    import tomllib\nexcept ImportError:\n    tomllib = None\n",
        "from typing import Any, TypedDict\n",
    ],
)
def test_accepts_guarded_imports(tmp_path: Path, source: str) -> None:
    assert _problems(tmp_path, source) == []


def test_vendored_upstream_files_are_not_ours_to_check(tmp_path: Path) -> None:
    (tmp_path / "prepare_finalize").mkdir()
    (tmp_path / "prepare_finalize" / "x.py").write_text("import tomllib\n", encoding="utf-8")
    assert check(tmp_path) == []
