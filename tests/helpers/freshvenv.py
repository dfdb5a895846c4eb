"""Fresh virtual environments with a real vLLM wheel and our overlay, installed from an index directory.

Torch and vLLM's import-time dependencies are not installed again in each venv (about 30 s and
1.8 GB each): a `_test_env.pth` appends the running environment's site-packages to the fresh
venv's sys.path. Its own site-packages come first, so its vllm and our overlay (and the overlay's
.pth hook, which only a venv's own site-packages run) are the ones that count.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name


def pip_env() -> dict[str, str]:
    # Only the index we name: no pip.conf extra indexes, no PIP_* from the caller.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def create(directory: Path, index: Path, requirements: list[str], vllm: Path | None = None) -> Path:
    """A venv at `directory` with the release wheel `vllm` and `requirements` from `index` (PEP 503 dir).

    Returns its python. The release wheel goes in by uv, linked from uv's cache as nox installed the
    head's (pip unpacks ~1 GB of files again in every venv: 6-7 s each); `requirements` (our
    overlay) by pip from the index, as a user installs it.
    """
    venv.EnvBuilder(with_pip=False, clear=True).create(directory)
    python = directory / "bin" / "python"
    if vllm is not None:
        install_no_deps(python, str(vllm))
    if requirements:
        _pip_install(python, index, requirements)
    # Last: with the test environment on its path, an installer would take its packages for the venv's own.
    lend_test_env(python)
    return python


def _pip_install(python: Path, index: Path, requirements: list[str]) -> None:
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


def uv_binary() -> str:
    beside = Path(sys.executable).with_name("uv")  # the test group installs uv beside python
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found, "uv is not installed (`nox -s test` installs it from the `test` group)"
    return found


def install_no_deps(python: Path, *requirements: str) -> None:
    """uv installs `requirements` (wheel files or pins) into the venv of `python`, without their dependencies.

    Run with the test session's own uv settings, as nox installed the same files into the test
    environment: uv links them from its cache instead of unpacking ~0.9 GB of vLLM again.
    """
    subprocess.run(
        [uv_binary(), "pip", "install", "--no-deps", "--quiet", "--python", str(python), *requirements],
        check=True,
        capture_output=True,
        text=True,
    )


def requirements_met(python: Path, names: list[str]) -> None:
    """A test double of "installed with all its dependencies", for the distributions `names` in the venv.

    vLLM's and FlashInfer's requirements are a CUDA stack (a CUDA torch, nvidia-*, cuda-tile) that
    cannot be installed here; the venv borrows the test environment's CPU torch instead
    (lend_test_env). pip and uv, when they install anything beside them without --no-deps, read
    the installed packages' Requires-Dist and would go looking for that stack. So each one's
    installed METADATA loses its Requires-Dist lines, and pip and uv see what they see after a
    user's complete install: requirements met. Its code, version and RECORD stay the release's.
    The new METADATA is written beside and renamed into place: uv links installed files to its
    cache, and writing through the link would change every environment that shares it.
    """
    site = site_packages(python)
    found = {_name(info / "METADATA"): info / "METADATA" for info in site.glob("*.dist-info")}
    for name in names:
        metadata = found[canonicalize_name(name)]
        lines = metadata.read_text("utf-8").splitlines(keepends=True)
        beside = metadata.with_name("METADATA.test-double")
        beside.write_text("".join(line for line in lines if not line.startswith("Requires-Dist:")), encoding="utf-8")
        os.replace(beside, metadata)


def _name(metadata: Path) -> str:
    return canonicalize_name(HeaderParser().parsestr(metadata.read_text("utf-8")).get("Name", ""))
