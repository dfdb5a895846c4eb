"""Build the overlay wheel `vllm-fused-moe`: vendor/vllm_fused_moe/ plus the activation hook.

The build is a list of named steps over one `BuildPlan`: collect the facts (pin, series,
verified FlashInfer range), stage a package tree with a generated pyproject.toml in a
temporary directory (vendor/ is never written), and run PyPA `build` with hatchling.
Hatchling writes reproducible wheels (sorted entries, normalised modes, zip times from
SOURCE_DATE_EPOCH), and we set SOURCE_DATE_EPOCH from the commit, so two builds of one
commit are byte-identical.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from release.core.errors import BadInputError, BadPatchLevelError, BuildError, ToolMissingError
from release.core.git import commit_time, head_commit
from release.core.hashing import sha256_hex
from release.core.layout import UPSTREAM_PACKAGE, Layout
from release.queue.patch import Patch
from release.queue.pin import Pin
from release.queue.series import Series
from release.queue.verified import verified_specifier

if TYPE_CHECKING:
    # The overlay package owns the format of the _build_info.json it reads; the tooling only writes it.
    # Not importable at run time (vendor/ is not on sys.path), so for the type checker only.
    from vllm_fused_moe._meta import BuildInfo

PROJECT = "vllm-fused-moe"
PACKAGE = "vllm_fused_moe"
# Pinned so that the backend, and so the bytes of the wheel, only change when we say so.
BACKEND = "hatchling"
BACKEND_VERSION = "1.33.0"
# The zip format cannot store times before 1980; used when there is no git commit to date.
ZIP_EPOCH = 315532800
PTH_NAME = f"{PACKAGE}.pth"
# One line, run by site.py at every interpreter start-up of the environment.
PTH_LINE = f"import {PACKAGE}._finder; {PACKAGE}._finder.install()\n"


@dataclass(frozen=True)
class BuildPlan:
    layout: Layout
    out: Path
    patch_level: int | None = None
    isolation: str = "auto"  # auto | on | off


@dataclass(frozen=True)
class BuildResult:
    wheel: Path
    sha256: str
    size: int
    seconds: float
    version: str
    source_date_epoch: int
    isolated: bool


def overlay_version(vllm_version: str, patch_level: int) -> str:
    """`0.20.0+fm.1`: vLLM's version, then our patch level as a PEP 440 local label.

    A local label is PEP 440's word for "upstream's release plus downstream patches". Its
    number is a separate dot segment so it compares as an integer (fm.10 > fm.9; fm10 < fm9).
    """
    if patch_level < 1:
        raise BadPatchLevelError(f"patch level {patch_level} is not a positive integer")
    return f"{vllm_version}+fm.{patch_level}"


def build(plan: BuildPlan) -> BuildResult:
    started = time.perf_counter()
    pin = Pin.load(plan.layout.upstream_toml)
    patches = active_patches(plan.layout)
    level = plan.patch_level if plan.patch_level is not None else max(len(patches), 1)
    version = overlay_version(pin.version, level)
    epoch = source_date_epoch(plan.layout.root)
    isolated = _use_isolation(plan.isolation)
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-build-") as scratch:
        stage = Path(scratch) / "src"
        stage_package(plan.layout, stage, version, pin, patches, epoch)
        built = run_backend(stage, Path(scratch) / "dist", epoch, isolated)
        plan.out.mkdir(parents=True, exist_ok=True)
        target = plan.out / built.name
        shutil.copyfile(built, target)
    data = target.read_bytes()
    return BuildResult(target, sha256_hex(data), len(data), time.perf_counter() - started, version, epoch, isolated)


def active_patches(layout: Layout) -> list[Patch]:
    series = Series.load(layout.series)
    return [Patch.load(layout.patches / name) for name in series.names]


def source_date_epoch(root: Path) -> int:
    """SOURCE_DATE_EPOCH if the caller set it, else the commit time of HEAD."""
    configured = os.environ.get("SOURCE_DATE_EPOCH")
    if configured:
        try:
            return max(int(configured), ZIP_EPOCH)
        except ValueError:
            raise BadInputError(f"SOURCE_DATE_EPOCH={configured!r} is not an integer") from None
    committed = commit_time(root)
    return max(committed, ZIP_EPOCH) if committed is not None else ZIP_EPOCH


# ----------------------------------------------------------------------- staging


def stage_package(layout: Layout, stage: Path, version: str, pin: Pin, patches: list[Patch], epoch: int) -> None:
    package = stage / PACKAGE
    shutil.copytree(
        layout.overlay, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_build_info.json", "patches")
    )
    (package / "patches").mkdir()
    shutil.copyfile(layout.series, package / "patches" / "series")
    for patch in patches:
        shutil.copyfile(layout.patches / patch.name, package / "patches" / patch.name)
    info = build_info(layout, version, pin, patches, epoch)
    (package / "_build_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (stage / PTH_NAME).write_text(PTH_LINE, encoding="utf-8")
    (stage / "pyproject.toml").write_text(pyproject(version, pin, verified_specifier(layout)), encoding="utf-8")
    (stage / "README.md").write_text(readme(version, pin, patches), encoding="utf-8")


def build_info(layout: Layout, version: str, pin: Pin, patches: list[Patch], epoch: int) -> BuildInfo:
    return {
        "version": version,
        "vllm_tag": pin.tag,
        "vllm_version": pin.version,
        "vllm_wheel": pin.wheel,
        "vllm_wheel_sha256": pin.wheel_sha256,
        "upstream_source": pin.source,
        "upstream_package": UPSTREAM_PACKAGE,
        "flashinfer_specifier": verified_specifier(layout),
        "commit": head_commit(layout.root),
        "source_date_epoch": epoch,
        "patches": [{"name": p.name, "subject": p.subject, "trailers": p.trailers} for p in patches],
    }


def pyproject(version: str, pin: Pin, flashinfer_specifier: str) -> str:
    return f'''[build-system]
requires = ["{BACKEND}=={BACKEND_VERSION}"]
build-backend = "hatchling.build"

[project]
name = "{PROJECT}"
version = "{version}"
description = "vLLM {pin.tag} fused-MoE prepare_finalize with the vllm-fused-moe patch series, activated in place"
readme = "README.md"
license = "Apache-2.0"
requires-python = ">=3.10"
dependencies = ["vllm=={pin.version}", "flashinfer-python{flashinfer_specifier}"]

[project.scripts]
vllm-fused-moe = "{PACKAGE}.__main__:main"

[tool.hatch.build.targets.wheel]
packages = ["{PACKAGE}"]

[tool.hatch.build.targets.wheel.force-include]
"{PTH_NAME}" = "{PTH_NAME}"
'''


def readme(version: str, pin: Pin, patches: list[Patch]) -> str:
    lines = [
        f"# vllm-fused-moe {version}",
        "",
        f"vLLM {pin.tag}'s `{UPSTREAM_PACKAGE}` with these patches, served under the upstream module",
        "names by an import hook (`vllm_fused_moe.pth`). `VLLM_FUSED_MOE=off` disables it,",
        "`VLLM_FUSED_MOE=strict` turns a version mismatch into an error. `vllm-fused-moe info` tells all.",
        "",
    ]
    lines += [f"- {p.name}: {p.subject} (Origin: {p.trailers.get('Origin', 'ours')})" for p in patches]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------- backend


def _use_isolation(isolation: str) -> bool:
    if isolation in ("on", "off"):
        return isolation == "on"
    # Without isolation the installed backend is used; only the pinned one gives the pinned bytes.
    try:
        return metadata.version(BACKEND) != BACKEND_VERSION
    except metadata.PackageNotFoundError:
        return True


def run_backend(stage: Path, outdir: Path, epoch: int, isolated: bool) -> Path:
    try:
        metadata.version("build")
    except metadata.PackageNotFoundError:
        raise ToolMissingError("PyPA `build` is not installed in this environment") from None
    argv = [sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir)]
    if not isolated:
        argv.append("--no-isolation")
    argv.append(str(stage))
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "PYTHONHASHSEED": "0"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise BuildError(f"`{' '.join(argv)}` failed (exit {proc.returncode})")
    wheels = sorted(outdir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"the backend left {len(wheels)} wheels in {outdir}, expected one")
    return wheels[0]
