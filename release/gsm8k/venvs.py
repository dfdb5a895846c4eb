"""Serving environments: a venv with the pinned vLLM, plus our overlay wheel from our index or not."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from release.core.errors import DataNotFoundError, InstallError
from release.core.layout import Layout
from release.model.pin import Pin

OVERLAY_DISTRIBUTION = "vllm-fused-moe"
PROBE_SCRIPT = Path(__file__).with_name("probe_env.py")
PROBE_MARKER = "GSM8K-PROBE "
INSTALL_TIMEOUT_S = 3600.0
PROBE_TIMEOUT_S = 600.0


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


def index_url(index_dir: Path) -> str:
    return index_dir.resolve().as_uri() + "/simple"


def install_commands(plan: InstallPlan) -> list[list[str]]:
    """The pip calls, in order.

    vLLM first, from wherever pip normally gets it; then our wheel with --index-url set to
    our index alone, so a same-named package on another index can never be picked up
    (its dependencies are already satisfied by the first step).
    """
    python = str(plan.venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    commands = [[*pip, *plan.vllm_index_args, f"vllm=={plan.vllm_version}"]]
    if plan.with_patches:
        if plan.index_dir is None:
            raise DataNotFoundError("installing the fixed wheel needs --index DIR (our PEP 503 index)")
        overlay = OVERLAY_DISTRIBUTION + (f"=={plan.overlay_version}" if plan.overlay_version else "")
        commands.append([*pip, "--index-url", index_url(plan.index_dir), overlay])
    return commands


def _run_logged(argv: Sequence[str], log_path: Path, timeout_s: float) -> None:
    with log_path.open("ab") as log:
        log.write(("$ " + " ".join(argv) + "\n").encode())
        log.flush()
        try:
            completed = subprocess.run(
                list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as err:
            raise InstallError(f"{argv[0]} ... timed out after {timeout_s:g} s; log: {log_path}") from err
    if completed.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
        raise InstallError(f"`{' '.join(argv)}` exited {completed.returncode}; log tail:\n{tail}")


def create_venv(plan: InstallPlan, log_path: Path) -> None:
    if plan.with_patches and plan.index_dir is not None and not (plan.index_dir / "simple").is_dir():
        raise DataNotFoundError(f"--index {plan.index_dir} has no simple/ directory (PEP 503 layout)")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    _run_logged([sys.executable, "-m", "venv", "--clear", str(plan.venv)], log_path, 600.0)
    for command in install_commands(plan):
        _run_logged(command, log_path, INSTALL_TIMEOUT_S)


def parse_probe_output(stdout: str) -> dict[str, object]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_MARKER):
            parsed = json.loads(line[len(PROBE_MARKER) :])
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
