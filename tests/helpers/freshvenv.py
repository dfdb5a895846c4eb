"""Fresh virtual environments with a real vLLM wheel and our overlay, installed from an index directory.

Torch and vLLM's import-time dependencies are not installed again in each venv (about 30 s and
1.8 GB each): a `_test_env.pth` appends the running environment's site-packages to the fresh
venv's sys.path. Its own site-packages come first, so its vllm and our overlay (and the overlay's
.pth hook, which only a venv's own site-packages run) are the ones that count.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path


def pip_env() -> dict[str, str]:
    # Only the index we name: no pip.conf extra indexes, no PIP_* from the caller.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def create(directory: Path, index: Path, requirements: list[str]) -> Path:
    """A venv at `directory` with `requirements` from `index` (PEP 503 dir); returns its python."""
    venv.EnvBuilder(with_pip=False, clear=True).create(directory)
    python = directory / "bin" / "python"
    # vLLM's own dependencies come from the test environment (see the module docstring), hence
    # --no-deps; the running pip installs into the venv through --python, so the venv needs no pip.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-compile",
            "--index-url",
            index.joinpath("simple").as_uri(),
            *requirements,
        ],
        check=True,
        env=pip_env(),
        capture_output=True,
        text=True,
    )
    lend_test_env(python)
    return python


def lend_test_env(python: Path) -> None:
    """Append the running environment's site-packages (torch, vLLM's import-time packages) to the venv's path."""
    (site_packages(python) / "_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")


def site_packages(python: Path) -> Path:
    return Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
