"""The tooling installs like any Python tool: `uv pip install` (pip's and pipx's path too: a PEP 517 build
with hatchling) of the checkout into a fresh venv gives a working `vllm-fused-moe-release`, which works on
the checkout it is run in; with a dependency missing it says how to install, in one error line.

Offline: uv takes hatchling and the tooling's pins from its cache, which the nox session that runs this
filled when it made its own venv (the `test` group includes the `tooling` group). And `--help` of one
command imports that command's module alone: no requests for `check`, no torch or vLLM for any.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from helpers.failure import failed
from release.core.errors import ModuleMissingError

SCRIPT = "vllm-fused-moe-release"


def uv(*args: str) -> None:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert found, "uv is in the test group"
    env = {**os.environ, "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    done = subprocess.run([found, *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def command(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_uv_pip_install_of_the_checkout_gives_a_working_command(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    python = str(venv / "bin" / "python")

    # Without its dependencies: one error line naming the module, one hint line saying how to install.
    uv("pip", "install", "--quiet", "--python", python, "--no-deps", str(REPO))
    bare = command(venv, "check", "--help", cwd=tmp_path)
    assert bare.returncode == 1 and "Traceback" not in bare.stderr, bare.stderr
    error = failed(bare)
    assert len(bare.stderr.splitlines()) == 2 and error.reference == ModuleMissingError.reference, bare.stderr
    assert error.message.startswith("the tooling needs the Python module "), error
    assert error.hint.startswith("install the tooling") and "uv tool install ." in error.hint, error

    uv("pip", "install", "--quiet", "--python", python, "--reinstall-package", "vllm-fused-moe-tooling", str(REPO))
    helped = command(venv, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: {SCRIPT} "), helped.stderr
    assert f"{SCRIPT} scan --since" in command(venv, "scan", "--help", cwd=tmp_path).stdout  # the examples, too

    # The installed command finds the checkout from the working directory, as git does ...
    status = command(venv, "status", cwd=REPO / "patches")
    assert status.returncode == 0 and status.stdout.strip(), status.stderr
    # ... and outside one says so, exit 2.
    outside = command(venv, "status", cwd=tmp_path)
    assert outside.returncode == 2 and "is not inside a checkout of vllm-fused-moe" in outside.stderr, outside.stderr


@pytest.mark.parametrize(("name", "heavy"), [("check", ("requests", "torch", "vllm")), ("status", ("requests",))])
def test_help_of_one_command_imports_only_what_it_needs(name: str, heavy: tuple[str, ...]) -> None:
    code = (
        "import sys\nfrom release.cli import main\n"
        "try:\n    main([sys.argv[1], '--help'])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if '.' not in m)))"
    )
    done = subprocess.run([sys.executable, "-c", code, name], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    imported = set(done.stdout.splitlines()[-1].split())
    assert not imported & set(heavy), sorted(imported & set(heavy))
