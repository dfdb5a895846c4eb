"""The user install of docs/overlay.md, run as written: with pip and with uv, from our index over HTTP.

Two loopback `python -m http.server`s serve PEP 503 directories made by `release publish`: ours,
holding the wheel this checkout builds, and a stand-in for the public index, which is the default
index of pip and uv in these runs (as PyPI is for a user) and offers `vllm-fused-moe` wheels that
are not ours, with higher versions. Each documented block runs in a fresh venv, line by line as an
argument list, with our server's URL and the pinned vLLM version in place of the doc's examples.

One line of each block is replaced, its first: installing vLLM with its dependencies takes a CUDA
torch and ~60 serving packages (several GB). Instead the test installs the cached vLLM release
wheel with `--no-deps` and lends the venv the test environment's torch (CPU) and import-time
packages, the shortcut of tests/helpers/freshvenv.py. Everything after it is the doc's own text.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

from helpers.freshvenv import lend_test_env
from release.overlay.build import BuildResult
from release.overlay.index import publish
from release.pristine.wheel import pypi_wheel

DOC = Path(__file__).resolve().parents[2] / "docs" / "overlay.md"
DOC_URL = "https://fused-moe.example.com/simple"
DOC_VLLM = "0.20.0"
# The doc's first command of each block, the one this test replaces (see the module docstring).
FIRST = {
    "pip": "python -m pip install vllm==0.20.0",
    "uv": "uv pip install vllm==0.20.0 --torch-backend=auto",
}
LIVE_CHECK = "python -m vllm_fused_moe doctor --live"
# Which vllm-fused-moe the venv holds, and whether it is one of the impostors.
INSTALLED = (
    "import importlib.metadata as m, vllm_fused_moe as p; print(m.version('vllm-fused-moe'), hasattr(p, 'IMPOSTOR'))"
)

pytestmark = pytest.mark.slow


def doc_blocks() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    blocks = dict(re.findall(r"^<!-- user-install: ([\w-]+) -->\n```\w*\n(.*?)^```", text, re.MULTILINE | re.DOTALL))
    assert set(blocks) == {"pip", "uv-pyproject", "uv"}, f"docs/overlay.md: user-install blocks {sorted(blocks)}"
    return blocks


def as_tested(text: str, url: str, vllm: str) -> str:
    return text.replace(DOC_URL, url).replace(f"=={DOC_VLLM}", f"=={vllm}")


def impostor(directory: Path, version: str) -> Path:
    """A `vllm-fused-moe` that is not ours; importing it shows it (`vllm_fused_moe.IMPOSTOR`)."""
    dist_info = f"vllm_fused_moe-{version}.dist-info"
    files = {
        "vllm_fused_moe/__init__.py": b"IMPOSTOR = True\n",
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: vllm-fused-moe\nVersion: {version}\nRequires-Python: >=3.10\n"
        ).encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for name, data in files.items()
    )
    files[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"vllm_fused_moe-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


@contextlib.contextmanager
def served(directory: Path) -> Iterator[str]:
    """`python -m http.server` over an index directory, as a user would host it; yields its /simple URL."""
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        port = re.search(r" port (\d+) ", banner)
        assert port, f"http.server said {banner!r}"
        yield f"http://127.0.0.1:{port.group(1)}/simple"
    finally:
        server.terminate()
        server.wait(timeout=30)


def uv_binary() -> str:
    beside = Path(sys.executable).with_name("uv")  # the test group installs uv beside python
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found, "uv is not installed (`nox -s test` installs it from the `test` group)"
    return found


@dataclass
class Step:
    line: str
    returncode: int
    output: str


@dataclass
class Flow:
    steps: list[Step]
    installed: str  # "<version> <is impostor>" of vllm-fused-moe in the venv


def user_shell(home: Path, env_dir: Path, public: str) -> dict[str, str]:
    """A user's shell with `env_dir` activated, the public index as the default one, nothing else configured."""
    inherited = ("PIP_", "UV_", "VIRTUAL_ENV", "PYTHONPATH", "VLLM_FUSED_MOE", "VLLM_PLUGINS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    path = os.pathsep.join([str(env_dir / "bin"), str(Path(uv_binary()).parent), env.get("PATH", "")])
    env.update(
        PATH=path,
        VIRTUAL_ENV=str(env_dir),
        XDG_CONFIG_HOME=str(home / "config"),  # no user-level pip.conf or uv.toml
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=public,
        PIP_CACHE_DIR=str(home / "pip-cache"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        UV_DEFAULT_INDEX=public,
        UV_CACHE_DIR=str(home / "uv-cache"),
        UV_PYTHON_DOWNLOADS="never",
    )
    return env


def run_line(line: str, env: dict[str, str], cwd: Path) -> Step:
    proc = subprocess.run(shlex.split(line), env=env, cwd=cwd, capture_output=True, text=True, timeout=900, check=False)
    return Step(line, proc.returncode, proc.stdout + proc.stderr)


def follow(kind: str, home: Path, block: str, vllm_wheel: Path, public: str, pyproject: str | None) -> Flow:
    """A fresh venv, the test's vLLM in place of the doc's first line, then the doc's lines as written."""
    first, *rest = [line for line in block.splitlines() if line.strip()]
    # as_tested() put the head's vLLM in place of the doc's; FIRST is the doc's line, so compare likewise.
    wanted = FIRST[kind].replace(f"=={DOC_VLLM}", first.split("vllm==", 1)[-1].split(" ", 1)[0].join(("==", "")))
    assert first == wanted, f"docs/overlay.md now starts the {kind} install with {first!r}: update FIRST"
    home.mkdir(parents=True)
    env_dir = home / "venv"
    env = user_shell(home, env_dir, public)
    if kind == "pip":
        venv.EnvBuilder(with_pip=True).create(env_dir)  # a user's venv has pip; uv's has not
        shortcut = ["python", "-m", "pip", "install", "--no-deps", "--no-compile", str(vllm_wheel)]
    else:
        subprocess.run([uv_binary(), "venv", "--quiet", "--python", sys.executable, str(env_dir)], env=env, check=True)
        shortcut = ["uv", "pip", "install", "--no-deps", "--quiet", str(vllm_wheel)]
    subprocess.run(shortcut, env=env, cwd=home, check=True, capture_output=True, timeout=900)
    lend_test_env(env_dir / "bin" / "python")
    if pyproject is not None:
        (home / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    steps = [run_line(line, env, home) for line in rest]
    installed = run_line(shlex.join(["python", "-c", INSTALLED]), env, home).output.strip()
    return Flow(steps, installed)


@dataclass
class Outcome:
    ours: str  # the version of the wheel this checkout built
    impostors: list[str]
    flows: dict[str, Flow]
    naive_pip: str  # what `--extra-index-url` would have installed
    unpinned_uv: str  # what uv would install from its default index, away from our pyproject.toml


@pytest.fixture(scope="module")
def outcome(
    built: BuildResult, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Outcome]:
    blocks = doc_blocks()
    vllm = Version(built.version).public
    root = tmp_path_factory.mktemp("user-install")
    publish([built.wheel], root / "ours")
    impostors = [f"{vllm}+fm.999", "99.0"]
    publish([impostor(root / "impostors", version) for version in impostors], root / "public")
    vllm_wheel = pypi_wheel(f"v{vllm}")
    failed_before = request.session.testsfailed
    with served(root / "ours") as ours_url, served(root / "public") as public_url, ThreadPoolExecutor(2) as pool:
        pip = pool.submit(
            follow, "pip", root / "pip", as_tested(blocks["pip"], ours_url, vllm), vllm_wheel, public_url, None
        )
        uv = pool.submit(
            follow,
            "uv",
            root / "uv",
            as_tested(blocks["uv"], ours_url, vllm),
            vllm_wheel,
            public_url,
            as_tested(blocks["uv-pyproject"], ours_url, vllm),
        )
        flows = {"pip": pip.result(), "uv": uv.result()}
        # The forms the doc warns against, to show that the impostors are real candidates.
        pip_env = user_shell(root / "pip", root / "pip" / "venv", public_url)
        naive = ["python", "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet"]
        report = subprocess.run(
            [*naive, "--report", "-", "--extra-index-url", ours_url, f"vllm-fused-moe=={vllm}"],
            env=pip_env,
            capture_output=True,
            text=True,
            check=True,
        )
        naive_pip = json.loads(report.stdout)["install"][0]["metadata"]["version"]
        nowhere = root / "no-project"
        nowhere.mkdir()
        uv_env = user_shell(root / "uv", root / "uv" / "venv", public_url)
        plain = run_line(f"uv pip install --dry-run --no-deps --reinstall vllm-fused-moe=={vllm}", uv_env, nowhere)
    yield Outcome(built.version, impostors, flows, naive_pip, plain.output)
    # Each venv holds an unpacked vLLM (~0.9 GB): gone as soon as this module passed.
    if request.session.testsfailed == failed_before:
        shutil.rmtree(root, ignore_errors=True)


def _steps_succeeded(flow: Flow) -> None:
    for step in flow.steps:
        assert step.returncode == 0, f"{step.line}\n{step.output[-3000:]}"


@pytest.mark.parametrize("kind", ["pip", "uv"])
def test_the_documented_install_takes_our_wheel_from_our_index(outcome: Outcome, kind: str) -> None:
    flow = outcome.flows[kind]
    _steps_succeeded(flow)
    assert flow.installed == f"{outcome.ours} False", flow.installed


@pytest.mark.parametrize("kind", ["pip", "uv"])
def test_after_the_install_vllm_fused_moe_reports_it_active_and_the_fix_is_live(outcome: Outcome, kind: str) -> None:
    flow = outcome.flows[kind]
    _steps_succeeded(flow)
    info = next(step for step in flow.steps if step.line == "python -m vllm_fused_moe")
    assert info.output.startswith(f"vllm-fused-moe {outcome.ours}\n"), info.output
    assert "status          activates when vLLM imports the subtree" in info.output, info.output
    live = next(step for step in flow.steps if step.line == LIVE_CHECK)
    for name in ("FlashInferNVLinkTwoSidedPrepareAndFinalize", "FlashInferNVLinkOneSidedPrepareAndFinalize"):
        assert f"{name}.output_is_reduced() = True, from our overlay" in live.output, live.output[-3000:]
    assert "verdict: fixed-live (exit 0)" in live.output, live.output[-3000:]


def test_a_higher_version_on_the_public_index_is_never_picked(outcome: Outcome) -> None:
    # The impostors are real candidates: the forms the doc warns against take one of them ...
    assert outcome.naive_pip in outcome.impostors
    assert Version(outcome.naive_pip) > Version(outcome.ours)
    assert re.search(rf"\+ vllm-fused-moe=={re.escape(outcome.impostors[0])}\b", outcome.unpinned_uv), (
        outcome.unpinned_uv
    )
    # ... and the documented ones never do.
    for flow in outcome.flows.values():
        assert flow.installed == f"{outcome.ours} False", flow.installed
