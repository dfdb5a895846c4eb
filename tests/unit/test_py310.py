"""The hook modules must import under Python 3.10 (vLLM supports it); the tooling is 3.11+.

`release.core.py310` checks it statically (nox -s lint runs it); these tests prove the check
catches what it claims to, and that the real hook modules load without the 3.11-only `tomllib`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.core.layout import Layout
from release.core.py310 import check
from release.overlay.build import assemble

# Our code of the wheel's top level: the .pth's module and the package (nox -s lint checks the same).
RUNTIME = Layout.default().runtime


def _problems(tmp_path: Path, source: str) -> list[str]:
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    return check(tmp_path)


def test_the_hook_modules_pass() -> None:
    assert check(RUNTIME) == []


def test_the_command_exits_1_on_a_problem(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("import tomllib\n", encoding="utf-8")
    bad = subprocess.run([sys.executable, "-m", "release.core.py310", str(tmp_path)], capture_output=True, text=True)
    good = subprocess.run([sys.executable, "-m", "release.core.py310", str(RUNTIME)], capture_output=True, text=True)
    assert (bad.returncode, good.returncode) == (1, 0), (bad.stdout, good.stdout)
    assert "mod.py:1: imports tomllib (Python 3.11+)" in bad.stdout


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


def _import_hook_without_tomllib(package_root: Path) -> subprocess.CompletedProcess[str]:
    # A 3.10 interpreter has no tomllib: blocking it in sys.modules makes `import tomllib` fail the same way.
    code = (
        "import sys; sys.modules['tomllib'] = None\n"
        "import vllm_fused_moe._finder, vllm_fused_moe._activate, vllm_fused_moe.__main__\n"
        "from vllm_fused_moe import _meta\n"
        "print(_meta.load()['vllm_tag'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=package_root)


def test_the_hook_loads_its_build_info_without_tomllib(tmp_path: Path) -> None:
    """In a built wheel (with _build_info.json) nothing reaches the tomllib import."""
    package = assemble(Layout.default(), tmp_path)  # the wheel's files, without the build facts

    source_tree = _import_hook_without_tomllib(tmp_path)
    # Without build info the source-tree fallback runs, and the blocked import fails: the block is real.
    assert source_tree.returncode != 0 and "tomllib" in source_tree.stderr

    info = {"vllm_tag": "v9.9.9", "vllm_version": "9.9.9", "version": "9.9.9+fm.1", "patches": []}
    (package / "_build_info.json").write_text(json.dumps(info), encoding="utf-8")
    built = _import_hook_without_tomllib(tmp_path)
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == "v9.9.9"
