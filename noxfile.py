"""Thin sessions: each installs a dependency group of pyproject.toml and calls `python -m release`.

`python3 -m nox -s lint test` is what CI runs (.ci/run); `python3 -m nox -l` lists the rest.
"""

from __future__ import annotations

import os
import tomllib
import urllib.request
from pathlib import Path

import nox

PYPROJECT = nox.project.load_toml("pyproject.toml")
nox.options.sessions = ["lint", "test"]
nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_existing_virtualenvs = True


def group(name: str) -> list[str]:
    return nox.project.dependency_groups(PYPROJECT, name)


def pinned_vllm() -> str:
    pin = tomllib.loads(Path("vendor/vllm_fused_moe/UPSTREAM.toml").read_text(encoding="utf-8"))
    return str(pin["upstream"]["tag"]).removeprefix("v")


def index_url(name: str) -> str:
    return str(next(index["url"] for index in PYPROJECT["tool"]["uv"]["index"] if index["name"] == name))


def unreachable(url: str) -> str | None:
    """Why `url` does not answer within a few seconds, or None: a dead index must not cost minutes."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10):
            return None
    except OSError as exc:  # URLError, timeouts and refused connections are all OSErrors
        return str(getattr(exc, "reason", exc))


def install_torch_cpu(session: nox.Session) -> None:
    """torch's CPU build from PyTorch's CPU index (PyPI's is the CUDA build): for torch only, with uv."""
    cpu_index = index_url("pytorch-cpu")
    why = unreachable(f"{cpu_index}/torch/")
    if why:
        # pip's own configuration (pip.conf, PIP_* variables) is what this machine offers instead;
        # tests/unit/test_environment.py fails if that was not a CPU build.
        session.warn(f"{cpu_index} is unreachable ({why}); torch from pip's configured indexes")
        session.run("python", "-m", "pip", "install", "--quiet", *group("torch-cpu"))
    elif session.venv_backend == "uv":
        session.install("--group", "torch-cpu")  # pyproject.toml pins torch to the explicit pytorch-cpu index
    else:
        # pip cannot pin one package to one index: this step sees the CPU index alone (which also
        # serves torch's dependencies), and the other installs never see it.
        session.install("--index-url", cpu_index, "--timeout", "30", *group("torch-cpu"))


def cached_vllm_wheel(session: nox.Session) -> str:
    """The pinned vLLM release wheel in the tooling's cache (downloaded there once, then reused)."""
    code = "import sys; from release.pristine.wheel import pypi_wheel; print(pypi_wheel(sys.argv[1]))"
    output = session.run("python", "-c", code, f"v{pinned_vllm()}", silent=True, stderr=None)
    return str(output).strip().splitlines()[-1]


def release(session: nox.Session, *args: str) -> None:
    session.install(*group("tooling"))
    session.run("python", "-m", "release", *args, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, mypy --strict; the hook modules also compile for Python 3.10."""
    session.install(*group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("python", "-m", "release.core.py310", "vendor/vllm_fused_moe")


@nox.session
def test(session: nox.Session) -> None:
    """The CPU suite: tooling, reduce contract, overlay wheel, GSM8K harness, workflows."""
    session.install(*group("test"))
    install_torch_cpu(session)
    session.install("-r", "tests/requirements-vllm-cpu.txt")
    # vLLM and FlashInfer ask for CUDA builds and serving stacks; the code under test imports neither.
    # vLLM's wheel is the file the tooling has cached, so it is downloaded once for both.
    session.install("--no-deps", cached_vllm_wheel(session), "flashinfer-python==0.6.8.post1")
    session.run("python", "-m", "pytest", "-m", "not gpu and not nvlink", *session.posargs)


@nox.session
def rebase(session: nox.Session) -> None:
    """Rebase vendor/ and patches/ onto a vLLM tag: nox -s rebase -- TAG [--from SOURCE] [--dry-run]."""
    release(session, "rebase")


@nox.session
def check(session: nox.Session) -> None:
    """vendor/ == pristine(UPSTREAM.toml) + series, file by file."""
    release(session, "check")


@nox.session
def scan(session: nox.Session) -> None:
    """Classify every vLLM release on the index for each patch: nox -s scan -- [--since TAG] [--until TAG]."""
    release(session, "scan")


@nox.session
def train(session: nox.Session) -> None:
    """The release train: nox -s train -- add TAG... | remove TAG | list [--json] | check [TAG...]."""
    release(session, "train")


@nox.session
def build(session: nox.Session) -> None:
    """Build the overlay wheel into dist/ (reproducible): the head, or `-- --all` for one per train tag."""
    release(session, "build")


@nox.session
def publish(session: nox.Session) -> None:
    """Add dist/*.whl to a PEP 503 index directory: nox -s publish -- DIST INDEX_DIR."""
    release(session, "publish")


@nox.session(venv_params=["--system-site-packages"])
def kernel(session: nox.Session) -> None:
    """FlashInfer kernel contract on a CUDA GPU (uses the runner's CUDA torch).

    FLASHINFER=V picks the flashinfer-python version (each train tag's pin; default the head's),
    e.g. `FLASHINFER=0.5.3 nox -s kernel`; a backend that version lacks is skipped with the reason.
    """
    version = os.environ.get("FLASHINFER", "0.6.8.post1")
    session.install(*group("kernel"), f"flashinfer-python=={version}")
    session.run("python", "-m", "pytest", "-m", "gpu", "tests/kernel", "-v", *session.posargs)


@nox.session
def gsm8k(session: nox.Session) -> None:
    """GSM8K 5-shot smoke against a real `vllm serve`: nox -s gsm8k -- --help."""
    release(session, "gsm8k")


@nox.session
def upstream_pr(session: nox.Session) -> None:
    """Turn a patch into an upstream PR: nox -s upstream_pr -- PATCH [--vllm PATH] [--out DIR]."""
    release(session, "upstream-pr")
