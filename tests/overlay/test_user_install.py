"""The user install of docs/overlay.md, run as written, with pip and with uv, in a hostile shell.

Our index is published by `python -m release publish` and served by `python -m http.server` on
127.0.0.1. A second loopback server is hostile: as an index and as find-links it offers
`vllm-fused-moe` wheels that are not ours (a higher patch level, a higher version, and our very
version with other bytes) and a `vllm` of the head's version that is not vLLM. The user's shell
names it everywhere pip and uv take sources from: a pip configuration (`PIP_CONFIG_FILE`) with
`index-url`, `extra-index-url` and `find-links`, a `uv.toml` and a `pyproject.toml` (`[tool.uv]`
with `override-dependencies` that swap our requirement for an impostor's URL, `[tool.uv.pip]`) in the
directory it runs in, and `UV_INDEX`, `UV_EXTRA_INDEX_URL`,
`UV_DEFAULT_INDEX`, `UV_FIND_LINKS`, with `UV_INDEX_STRATEGY=unsafe-best-match` and
`UV_NO_VERIFY_HASHES=1`. Each documented block runs in a fresh venv, line by line as an argument
list, with our server's URL and the head's vLLM version in place of the doc's examples.

What the test replaces, and why (docs/overlay.md, "The tests", says the same):
- the first line of each block: installing vLLM with its dependencies takes a CUDA torch and ~60
  serving packages (several GB). Instead the venv gets the cached vLLM release wheel and the
  FlashInfer release it pins with `--no-deps`, borrows the test environment's torch (CPU) and
  import-time packages (tests/helpers/freshvenv.py), and, a test double, loses the Requires-Dist
  lines of those two packages' installed METADATA (`freshvenv.requirements_met`): the documented
  install checks the environment as pip and uv read it, and a user's complete install meets them.
- `--torch-backend=auto` is run with `torch --dry-run --offline -v` appended: PyTorch's index is
  not reachable here, so the test checks what uv decides, not what it installs.

A third venv holds another release's vLLM (from the train's facts, as tests/overlay/conftest.py
picks it): there the same install lines must fail before installing anything and name versions.
Three venvs in all, built concurrently, shared by every test of the module.
"""

from __future__ import annotations

import contextlib
import ensurepip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

from helpers import REPO, tag_facts
from helpers.build import PUBLISH_BUILT
from helpers.doc_commands import user_install_blocks
from helpers.freshvenv import install_no_deps, lend_test_env, requirements_met, uv_binary
from helpers.synthetic import impostor
from release.core.versions import version_of_tag
from release.overlay.build import BuildResult
from release.overlay.index import publish

DOC = REPO / "docs" / "overlay.md"
DOC_URL = "https://fused-moe.example.com"
DOC_VLLM = "0.20.0"
# The doc's first command of each block, the one this test replaces (see the module docstring).
FIRST = {
    "pip": "python -m pip install vllm==0.20.0",
    "uv": "uv pip install vllm==0.20.0 --torch-backend=auto",
}
# How the doc's install line (the second) and check line (the third) of each block start.
INSTALL = {"pip": "python -m pip install --no-index --find-links ", "uv": "uv pip install --no-config --no-index "}
CHECK = {"pip": "python -m pip check", "uv": "uv pip check"}
LIVE_CHECK = "python -m vllm_fused_moe doctor --live"
# What the venv holds: our overlay's version (or None), whether it is an impostor, and vLLM's version.
INSTALLED = """
import importlib.metadata as m, json
try:
    import vllm_fused_moe as p
    overlay, impostor = m.version("vllm-fused-moe"), hasattr(p, "IMPOSTOR")
except ImportError:
    overlay, impostor = None, False
print(json.dumps({"overlay": overlay, "impostor": impostor, "vllm": m.version("vllm")}))
"""
# Packages the shortcut installs whose own requirements the double marks as met.
INSTALLED_BY_THE_FIRST_LINE = ["vllm", "flashinfer-python"]

pytestmark = pytest.mark.slow


def doc_lines(kind: str) -> list[str]:
    blocks = user_install_blocks(DOC.read_text(encoding="utf-8"))
    assert set(blocks) == {"pip", "uv"}, f"docs/overlay.md: user-install blocks {sorted(blocks)}"
    lines = blocks[kind]
    assert lines[0] == FIRST[kind], f"docs/overlay.md now starts the {kind} install with {lines[0]!r}: update FIRST"
    assert lines[1].startswith(INSTALL[kind]) and lines[2] == CHECK[kind], lines
    return lines


def as_tested(line: str, url: str, vllm: str) -> str:
    """The doc's line with our server and the head's vLLM in place of the examples."""
    line = line.replace(DOC_URL, url).replace(f"vllm-{DOC_VLLM}.txt", f"vllm-{vllm}.txt")
    return line.replace(f"vllm=={DOC_VLLM}", f"vllm=={vllm}")


def impostor_of(vllm: str) -> str:
    """The file name of the hostile server's higher patch level for `vllm` (see the `outcome` fixture)."""
    return f"vllm_fused_moe-{vllm}+fm.99-py3-none-any.whl"


@contextlib.contextmanager
def served(directory: Path) -> Iterator[str]:
    """`python -m http.server` over a directory, as the doc serves an index; yields its base URL."""
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
        yield f"http://127.0.0.1:{port.group(1)}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@dataclass
class Step:
    line: str
    returncode: int
    output: str


@dataclass
class Shell:
    """A user's shell: its environment and the directory it runs in."""

    env: dict[str, str]
    cwd: Path

    def run(self, line: str) -> Step:
        proc = subprocess.run(
            shlex.split(line), env=self.env, cwd=self.cwd, capture_output=True, text=True, timeout=900, check=False
        )
        return Step(line, proc.returncode, proc.stdout + proc.stderr)

    def installed(self) -> dict[str, object]:
        step = self.run(shlex.join(["python", "-c", INSTALLED]))
        assert step.returncode == 0, step.output
        found: dict[str, object] = json.loads(step.output.strip().splitlines()[-1])
        return found


def user_shell(home: Path, env_dir: Path, hostile: str | None, impostor: str = "") -> Shell:
    """A user's shell with `env_dir` activated; with `hostile`, every pip and uv source setting names it.

    `impostor`, a file name under `hostile`/links/: the project's `override-dependencies` replace
    our requirement by it (uv takes an override over a pinned hash: --no-config is what stops it).
    """
    where = home / ("hostile" if hostile else "plain")  # its configuration files, and where it runs
    where.mkdir(parents=True, exist_ok=True)
    inherited = ("PIP_", "UV_", "VIRTUAL_ENV", "PYTHONPATH", "VLLM_FUSED_MOE", "VLLM_PLUGINS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env.update(
        PATH=os.pathsep.join([str(env_dir / "bin"), str(Path(uv_binary()).parent), env.get("PATH", "")]),
        VIRTUAL_ENV=str(env_dir),
        XDG_CONFIG_HOME=str(where / "config"),  # the user's uv.toml (and no user pip.conf)
        PIP_CONFIG_FILE=os.devnull,
        PIP_CACHE_DIR=str(home / "pip-cache"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        UV_CACHE_DIR=str(home / "uv-cache"),
        UV_PYTHON_DOWNLOADS="never",
    )
    if hostile is None:
        return Shell(env, where)
    config = where / "pip.conf"
    config.write_text(
        f"[global]\nindex-url = {hostile}/simple\nextra-index-url = {hostile}/simple\nfind-links = {hostile}/links/\n",
        encoding="utf-8",
    )
    uv_settings = (
        f'extra-index-url = ["{hostile}/simple"]\nfind-links = ["{hostile}/links/"]\n'
        'index-strategy = "unsafe-best-match"\n'
    )
    uv_toml = where / "config" / "uv" / "uv.toml"
    uv_toml.parent.mkdir(parents=True, exist_ok=True)
    uv_toml.write_text(uv_settings, encoding="utf-8")
    # A project's settings in the directory the user installs from, for uv and for `uv pip`.
    override = f'override-dependencies = ["vllm-fused-moe @ {hostile}/links/{impostor}"]\n' if impostor else ""
    (where / "pyproject.toml").write_text(
        f'[project]\nname = "deployment"\nversion = "1"\n\n[tool.uv]\n{uv_settings}{override}'
        f"\n[tool.uv.pip]\n{uv_settings}",
        encoding="utf-8",
    )
    env.update(
        PIP_CONFIG_FILE=str(config),
        UV_INDEX=f"{hostile}/simple",
        UV_EXTRA_INDEX_URL=f"{hostile}/simple",
        UV_DEFAULT_INDEX=f"{hostile}/simple",
        UV_FIND_LINKS=f"{hostile}/links/",
        UV_INDEX_STRATEGY="unsafe-best-match",
        UV_NO_VERIFY_HASHES="1",
    )
    return Shell(env, where)


def fresh_venv(kind: str, home: Path, vllm_wheel: Path) -> Path:
    """A venv as the doc's first line leaves it, by the shortcut of the module docstring; returns it."""
    home.mkdir(parents=True)
    env_dir = home / "venv"
    pip: list[str] = []
    if kind == "pip":
        # A user's venv has pip; uv's has not. The pip `python -m venv` puts there is the one ensurepip
        # bundles: linked here from that very wheel by uv (ensurepip unpacks and compiles it again, with
        # setuptools 65, which would hide the borrowed torch's newer one from `pip check`: a venv made
        # by Python 3.12+ has no setuptools either).
        venv.EnvBuilder(with_pip=False).create(env_dir)
        pip = [str(bundled_pip())]
    else:
        subprocess.run([uv_binary(), "venv", "--quiet", "--python", sys.executable, str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    install_no_deps(python, str(vllm_wheel), tag_facts.head().flashinfer, *pip)
    requirements_met(python, INSTALLED_BY_THE_FIRST_LINE)
    lend_test_env(python)
    return env_dir


def bundled_pip() -> Path:
    """The pip wheel this Python's ensurepip installs into a new venv."""
    found = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    assert len(found) == 1, f"ensurepip bundles {found}"
    return found[0]


@dataclass
class Flow:
    steps: list[Step]
    installed: dict[str, object]


def follow(kind: str, home: Path, vllm_wheel: Path, ours: str, hostile: str, vllm: str) -> Flow:
    """The doc's block after its first line, as written, in a hostile shell."""
    env_dir = fresh_venv(kind, home, vllm_wheel)
    shell = user_shell(home, env_dir, hostile, impostor_of(vllm))
    steps = [shell.run(as_tested(line, ours, vllm)) for line in doc_lines(kind)[1:]]
    return Flow(steps, shell.installed())


@dataclass
class Wrong:
    """The venv with another release's vLLM."""

    vllm: str  # the vLLM it holds
    refused: dict[str, Step]  # the doc's install line, per "<pip|uv>-<plain|hostile>"
    after_refusals: dict[str, object]
    by_name_pip: Step  # an install by name from our index (no requirements file), a dry run in the hostile shell
    by_name_uv: Step
    forced: Step  # an install by name with --no-deps
    checks: dict[str, Step]  # pip check, uv pip check after it


def wrong_environment(home: Path, vllm_wheel: Path, ours: str, hostile: str, vllm: str) -> Wrong:
    env_dir = fresh_venv("pip", home, vllm_wheel)
    shells = {
        "plain": user_shell(home, env_dir, None),
        "hostile": user_shell(home, env_dir, hostile, impostor_of(vllm)),
    }
    refused = {
        f"{kind}-{name}": shell.run(as_tested(doc_lines(kind)[1], ours, vllm))
        for kind in ("pip", "uv")
        for name, shell in shells.items()
    }
    after = shells["plain"].installed()
    # An install by name from our index, which the docs do not show for this reason: in the hostile
    # shell the impostors are real candidates, and one is taken.
    by_name = f"--no-deps --index-url {ours}/simple vllm-fused-moe=={vllm}"
    report = "--dry-run --ignore-installed --quiet --report -"
    by_name_pip = shells["hostile"].run(f"python -m pip install {report} {by_name}")
    by_name_uv = shells["hostile"].run(f"uv pip install --dry-run {by_name}")
    forced = shells["plain"].run(f"python -m pip install {by_name}")
    checks = {kind: shells["plain"].run(CHECK[kind]) for kind in ("pip", "uv")}
    return Wrong(str(after["vllm"]), refused, after, by_name_pip, by_name_uv, forced, checks)


@dataclass
class Outcome:
    ours: str  # the version of the wheel this checkout built
    vllm: str  # the head's vLLM, the one our wheel requires
    other: str  # the other release's vLLM, in the wrong environment
    impostors: list[str]
    flows: dict[str, Flow]
    wrong: Wrong


@pytest.fixture(scope="module")
def outcome(
    built: BuildResult,
    vllm_wheels: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Outcome]:
    for kind in FIRST:
        doc_lines(kind)  # the doc's shape first: a clear message before minutes of venvs
    vllm = Version(built.version).public
    other = version_of_tag(tag_facts.other_than_head())
    assert other != vllm and set(vllm_wheels) == {vllm, other}
    root = tmp_path_factory.mktemp("user-install")
    published = subprocess.run(
        [sys.executable, "-m", "release", *PUBLISH_BUILT, str(built.wheel), str(root / "ours")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert published.returncode == 0, published.stderr
    impostors = [f"{vllm}+fm.99", "99.0", built.version]  # the last: our very version, other bytes
    links = root / "hostile" / "links"
    fakes = [impostor(links, "vllm-fused-moe", version) for version in impostors] + [impostor(links, "vllm", vllm)]
    assert fakes[0].name == impostor_of(vllm)
    publish(fakes, root / "hostile")  # the plain index writer: our command would refuse the fake vllm
    failed_before = request.session.testsfailed
    with served(root / "ours") as ours, served(root / "hostile") as hostile, ThreadPoolExecutor(3) as pool:
        flows = {
            kind: pool.submit(follow, kind, root / kind, vllm_wheels[vllm], ours, hostile, vllm)
            for kind in ("pip", "uv")
        }
        wrong = pool.submit(wrong_environment, root / "wrong", vllm_wheels[other], ours, hostile, vllm)
        result = Outcome(
            built.version, vllm, other, impostors, {k: f.result() for k, f in flows.items()}, wrong.result()
        )
    yield result
    # Each venv links an unpacked vLLM (~0.9 GB): gone as soon as this module passed.
    if request.session.testsfailed == failed_before:
        shutil.rmtree(root, ignore_errors=True)


def _steps_succeeded(flow: Flow) -> None:
    for step in flow.steps:
        assert step.returncode == 0, f"{step.line}\n{step.output[-3000:]}"


@pytest.mark.parametrize("kind", ["pip", "uv"])
def test_the_documented_install_takes_our_wheel_and_nothing_else_in_a_hostile_shell(
    outcome: Outcome, kind: str
) -> None:
    flow = outcome.flows[kind]
    _steps_succeeded(flow)
    assert flow.installed == {"overlay": outcome.ours, "impostor": False, "vllm": outcome.vllm}
    install = flow.steps[0].output
    if kind == "pip":
        assert re.findall(r"^Successfully installed (.*)$", install, re.M) == [f"vllm-fused-moe-{outcome.ours}"], (
            install
        )
    else:
        changes = [line for line in install.splitlines() if line.startswith((" + ", " - "))]
        assert changes == [f" + vllm-fused-moe=={outcome.ours}"], install


@pytest.mark.parametrize(
    ("kind", "says"), [("pip", "No broken requirements found."), ("uv", "All installed packages are compatible")]
)
def test_pip_check_and_uv_pip_check_pass_after_it(outcome: Outcome, kind: str, says: str) -> None:
    check = outcome.flows[kind].steps[1]
    assert check.line == CHECK[kind] and check.returncode == 0 and says in check.output, check.output


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


def test_an_install_by_name_takes_an_impostor_in_the_same_shell(outcome: Outcome) -> None:
    # The hostile shell's impostors are real candidates: an install by name, not by the requirements file, takes one.
    by_name_pip, by_name_uv = outcome.wrong.by_name_pip, outcome.wrong.by_name_uv
    assert by_name_pip.returncode == 0, by_name_pip.output
    taken = json.loads(by_name_pip.output[by_name_pip.output.index("{") :])["install"][0]["metadata"]["version"]
    assert taken == outcome.impostors[0], by_name_pip.output
    # uv takes it from the first index that has the name, or from the project's override (its URL).
    taken_by_uv = rf"^ \+ vllm-fused-moe(==| @ \S+/vllm_fused_moe-){re.escape(outcome.impostors[0])}\b"
    assert re.search(taken_by_uv, by_name_uv.output, re.M), by_name_uv.output


@pytest.mark.parametrize("case", ["pip-plain", "pip-hostile", "uv-plain", "uv-hostile"])
def test_another_vllm_is_refused_at_install_time_naming_the_versions(outcome: Outcome, case: str) -> None:
    step, vllm, ours = outcome.wrong.refused[case], outcome.vllm, outcome.ours
    assert step.returncode == 1, step.output
    if case == "pip-plain":
        assert f"Collecting vllm-fused-moe=={ours}" in step.output, step.output
        assert re.search(rf"^ERROR: No matching distribution found for vllm=={re.escape(vllm)}\b", step.output, re.M)
    elif case == "pip-hostile":  # the hostile find-links offer a `vllm` of that version: hashes stop it
        assert "ERROR: Hashes are required in --require-hashes mode" in step.output, step.output
        assert f"    vllm=={vllm} --hash=sha256:" in step.output, step.output
    else:
        # uv wraps its explanation to the width it finds (a terminal's or COLUMNS; 80 under xdist's workers).
        words = " ".join(step.output.split())
        because = "vllm was not found in the provided package locations and all versions of vllm-fused-moe depend on"
        assert f"{because} vllm=={vllm}" in words, step.output
        unsatisfiable = "we can conclude that your requirements are unsatisfiable"
        assert f"you require vllm-fused-moe=={ours}, {unsatisfiable}" in words, step.output
    # Nothing was installed, and the vLLM there is still the one the user had.
    assert outcome.wrong.after_refusals == {"overlay": None, "impostor": False, "vllm": outcome.other}


def test_pip_check_and_uv_pip_check_name_an_overlay_forced_in_with_no_deps(outcome: Outcome) -> None:
    wrong = outcome.wrong
    assert wrong.forced.returncode == 0 and "Successfully installed" in wrong.forced.output, wrong.forced.output
    pip, uv = wrong.checks["pip"], wrong.checks["uv"]
    assert (
        pip.returncode == 1
        and (f"vllm-fused-moe {outcome.ours} has requirement vllm=={outcome.vllm}, but you have vllm {outcome.other}.")
        in pip.output
    ), pip.output
    assert (
        uv.returncode == 1
        and (f"The package `vllm-fused-moe` requires `vllm=={outcome.vllm}`, but `{outcome.other}` is installed")
        in uv.output
    ), uv.output


def test_torch_backend_auto_routes_pytorch_packages_by_the_driver_it_finds(tmp_path: Path) -> None:
    """What can be verified of `--torch-backend=auto` without PyTorch's index (docs/overlay.md)."""
    first = as_tested(FIRST["uv"], "", tag_facts.head().version)
    assert doc_lines("uv")[0] == FIRST["uv"]
    env_dir = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "--quiet", "--python", sys.executable, str(env_dir)], check=True)
    shell = user_shell(tmp_path, env_dir, None)
    shell.env["UV_DEFAULT_INDEX"] = "http://127.0.0.1:9/simple"  # the user's default index; offline, never asked
    step = shell.run(f"{first} torch --dry-run --offline -v")
    assert "unexpected argument" not in step.output and "DEBUG Adding direct dependency: torch" in step.output, (
        step.output
    )
    # vLLM itself comes from the default index; only PyTorch's packages are routed.
    assert "GET request for: http://127.0.0.1:9/simple/vllm/" in step.output, step.output
    driver = re.search(r"Detected CUDA driver version from .*", step.output)
    if driver is None:
        assert "DEBUG Failed to detect GPU driver version" in step.output, step.output
        assert "GET request for: https://download.pytorch.org/whl/cpu/torch/" in step.output, step.output
    else:
        assert re.search(r"GET request for: https://download\.pytorch\.org/whl/cu\d+/torch/", step.output), step.output
