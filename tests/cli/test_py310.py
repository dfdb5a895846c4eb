"""The Python 3.10 check as processes: `python -m release.overlay.py310` exits 1 on a problem, and the
real hook modules import in an interpreter without `tomllib` (as on 3.10) once the build info is there.
What the check catches is tested in-process in tests/unit/test_py310.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from release.core.layout import Layout
from release.overlay.stage import assemble
from release.overlay.target import head_target
from release.queue.snapshot import Checkout

# Our code of the wheel's top level: the .pth's module and the package (nox -s lint checks the same).
RUNTIME = Layout.default().runtime


def test_the_command_exits_1_on_a_problem(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("import tomllib\n", encoding="utf-8")
    bad = subprocess.run([sys.executable, "-m", "release.overlay.py310", str(tmp_path)], capture_output=True, text=True)
    good = subprocess.run([sys.executable, "-m", "release.overlay.py310", str(RUNTIME)], capture_output=True, text=True)
    assert (bad.returncode, good.returncode) == (1, 0), (bad.stdout, good.stdout)
    assert "mod.py:1: imports tomllib (Python 3.11+)" in bad.stdout


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
    layout = Layout.default()
    line = head_target(Checkout.load(layout), "").line
    package = assemble(layout, tmp_path, line)  # the wheel's files, without the build facts

    source_tree = _import_hook_without_tomllib(tmp_path)
    # Without build info the source-tree fallback runs, and the blocked import fails: the block is real.
    assert source_tree.returncode != 0 and "tomllib" in source_tree.stderr

    info = {"vllm_tag": "v9.9.9", "vllm_version": "9.9.9", "version": "9.9.9+fm.1", "patches": []}
    (package / "_build_info.json").write_text(json.dumps(info), encoding="utf-8")
    built = _import_hook_without_tomllib(tmp_path)
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == "v9.9.9"
