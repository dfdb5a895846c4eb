"""Serving environments: a venv with the pinned vLLM, plus our overlay wheel from our index or not."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from release.core.errors import DataNotFoundError, InstallError, NoGpuError
from release.core.hashing import file_sha256
from release.core.journal import write_atomic
from release.core.layout import Layout
from release.core.parse import parse_json
from release.gsm8k.progress import note
from release.model.pin import Pin

OVERLAY_DISTRIBUTION = "vllm-fused-moe"
PROBE_SCRIPT = Path(__file__).with_name("probe_env.py")
PROBE_MARKER = "GSM8K-PROBE "
INSTALL_TIMEOUT_S = 3600.0
PROBE_TIMEOUT_S = 600.0
GPU_QUERY_TIMEOUT_S = 30.0
PROGRESS_INTERVAL_S = 30.0  # a vLLM install takes minutes: say it is still going this often


def pinned_vllm_version(layout: Layout | None = None) -> str:
    """The vLLM release vendor/ was built from (UPSTREAM.toml): the default to serve."""
    return Pin.load((layout or Layout.default()).upstream_toml).version


@dataclass(frozen=True)
class InstallPlan:
    venv: Path
    with_patches: bool
    index_dir: Path | None = None
    vllm_version: str = field(default_factory=pinned_vllm_version)
    overlay_version: str | None = None
    # Where vLLM and its dependencies come from; empty = pip's own configuration.
    vllm_index_args: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ServingEnv:
    venv: Path
    with_patches: bool
    versions: dict[str, str | None]
    output_is_reduced: dict[str, bool | str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def vllm(self) -> Path:
        return self.venv / "bin" / "vllm"

    def fix_active(self, backend: str) -> bool | None:
        value = self.output_is_reduced.get(backend)
        return value if isinstance(value, bool) else None


def project_page(index_dir: Path) -> str:
    """Our project's page in the index, the one place the overlay install looks."""
    return (index_dir / "simple" / OVERLAY_DISTRIBUTION).resolve().as_uri() + "/"


def overlay_requirements(plan: InstallPlan) -> Path:
    """The requirements file that pins our wheel by version and sha256 (docs/overlay.md, "Install").

    The newest overlay of the plan's vLLM: the file `publish` wrote into the index. A version
    named by --wheel-version: a file beside the venv that create_venv writes from that wheel's bytes.
    """
    if plan.index_dir is None:
        raise DataNotFoundError("installing the fixed wheel needs --index DIR (our PEP 503 index)")
    if plan.overlay_version is None:
        return plan.index_dir.resolve() / "requirements" / f"vllm-{plan.vllm_version}.txt"
    return plan.venv.parent / f"requirements-{plan.venv.name}.txt"


def install_commands(plan: InstallPlan) -> list[list[str]]:
    """The pip calls, in order.

    vLLM first, from wherever pip normally gets it; then our wheel as a user installs it: from our
    project page alone (`--no-index`) and by a requirements file that pins its sha256. An index
    given on the command line is not enough: the `extra-index-url` and `find-links` of the user's
    pip configuration add candidates, and a same-named package of a higher version would win; in
    hash-checking mode pip installs our file or nothing. vLLM and its dependencies are installed
    by the first step, so the second installs nothing else.
    """
    python = str(plan.venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    commands = [[*pip, *plan.vllm_index_args, f"vllm=={plan.vllm_version}"]]
    if plan.with_patches:
        requirements = overlay_requirements(plan)
        assert plan.index_dir is not None  # overlay_requirements refused it
        commands.append([*pip, "--no-index", "--find-links", project_page(plan.index_dir), "-r", str(requirements)])
    return commands


def write_pinned_requirements(plan: InstallPlan) -> None:
    """For --wheel-version: pin that wheel of our index by the sha256 of its bytes."""
    if not plan.with_patches or plan.overlay_version is None or plan.index_dir is None:
        return
    page = plan.index_dir / "simple" / OVERLAY_DISTRIBUTION
    wheels = sorted(page.glob(f"{OVERLAY_DISTRIBUTION.replace('-', '_')}-{plan.overlay_version}-*.whl"))
    if not wheels:
        raise DataNotFoundError(f"--index {plan.index_dir} holds no vllm-fused-moe {plan.overlay_version} ({page})")
    text = f"{OVERLAY_DISTRIBUTION}=={plan.overlay_version} \\\n    --hash=sha256:{file_sha256(wheels[0])}\n"
    target = overlay_requirements(plan)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, text.encode())


def require_gpu() -> str:
    """The GPUs `nvidia-smi -L` lists; NoGpuError where it is missing, fails or lists none.

    Asked before any install: serving vLLM needs an NVIDIA GPU, and without one a run would
    spend minutes installing vLLM before the server fails to start.
    """
    argv = ["nvidia-smi", "-L"]
    try:
        found = subprocess.run(
            argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=GPU_QUERY_TIMEOUT_S, check=False
        )
    except FileNotFoundError as err:
        raise NoGpuError("no NVIDIA GPU here: `nvidia-smi` is not on PATH; nothing was installed") from err
    except subprocess.TimeoutExpired as err:
        message = f"`nvidia-smi -L` gave no answer within {GPU_QUERY_TIMEOUT_S:g} s; nothing was installed"
        raise NoGpuError(message) from err
    gpus = [line for line in found.stdout.splitlines() if line.startswith("GPU ")]
    if found.returncode != 0 or not gpus:
        said = (found.stdout + found.stderr).strip().splitlines()
        raise NoGpuError(
            f"no NVIDIA GPU here: `nvidia-smi -L` exited {found.returncode}"
            + (f" ({said[-1]})" if said else "")
            + "; nothing was installed"
        )
    return "\n".join(gpus)


def _run_logged(argv: Sequence[str], log_path: Path, timeout_s: float, what: str = "") -> None:
    """Run `argv` with its output in `log_path`; every PROGRESS_INTERVAL_S say that it is still running."""
    started = time.monotonic()
    with log_path.open("ab") as log:
        log.write(("$ " + " ".join(argv) + "\n").encode())
        log.flush()
        process = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            while True:
                left = timeout_s - (time.monotonic() - started)
                try:
                    returncode = process.wait(timeout=max(0.0, min(PROGRESS_INTERVAL_S, left)))
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() - started >= timeout_s:
                        process.kill()
                        process.wait()
                        raise InstallError(f"{argv[0]} ... timed out after {timeout_s:g} s; log: {log_path}") from None
                    note(f"{what or argv[0]}: still running after {time.monotonic() - started:.0f} s (log: {log_path})")
        except BaseException:
            if process.poll() is None:
                process.kill()
                process.wait()
            raise
    if returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
        raise InstallError(f"`{' '.join(argv)}` exited {returncode}; log tail:\n{tail}")


def create_venv(plan: InstallPlan, log_path: Path) -> None:
    if plan.with_patches and plan.index_dir is not None and not (plan.index_dir / "simple").is_dir():
        raise DataNotFoundError(f"--index {plan.index_dir} has no simple/ directory (PEP 503 layout)")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if plan.with_patches and not overlay_requirements(plan).is_file() and plan.overlay_version is None:
        raise DataNotFoundError(
            f"--index {plan.index_dir} has no requirements/vllm-{plan.vllm_version}.txt: "
            f"it holds no overlay of vLLM {plan.vllm_version}"
        )
    write_pinned_requirements(plan)
    _run_logged([sys.executable, "-m", "venv", "--clear", str(plan.venv)], log_path, 600.0, "creating the venv")
    for command in install_commands(plan):
        what = f"{OVERLAY_DISTRIBUTION} (-r {command[-1]})" if "-r" in command else command[-1]
        note(f"installing {what} into {plan.venv}")
        _run_logged(command, log_path, INSTALL_TIMEOUT_S, f"installing {what}")


def parse_probe_output(stdout: str) -> dict[str, object]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_MARKER):
            parsed = parse_json(line[len(PROBE_MARKER) :], where="the environment probe", error=InstallError)
            if isinstance(parsed, dict):
                return parsed
    raise InstallError(f"environment probe printed no {PROBE_MARKER.strip()} line; output tail:\n{stdout[-2000:]}")


def probe(venv: Path, with_patches: bool) -> ServingEnv:
    python = venv / "bin" / "python"
    if not python.exists():
        raise DataNotFoundError(f"{venv} is not a virtual environment (no bin/python)")
    try:
        completed = subprocess.run(
            [str(python), str(PROBE_SCRIPT)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as err:
        raise InstallError(f"environment probe in {venv} timed out after {PROBE_TIMEOUT_S:g} s") from err
    if completed.returncode != 0:
        raise InstallError(f"environment probe in {venv} exited {completed.returncode}:\n{completed.stderr[-2000:]}")
    found = parse_probe_output(completed.stdout)
    versions = found.get("versions", {})
    reduced = found.get("output_is_reduced", {})
    return ServingEnv(
        venv=venv,
        with_patches=with_patches,
        versions=dict(versions) if isinstance(versions, dict) else {},
        output_is_reduced=dict(reduced) if isinstance(reduced, dict) else {},
    )
