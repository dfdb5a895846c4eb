"""Build the overlay wheel `vllm-fused-moe`: vendor/vllm_fused_moe/ plus the activation hook.

One wheel per vLLM tag: `build` makes the head's from vendor/; `build_train` makes one per
train tag, the head's from vendor/ and every other tag's from its pristine source + the
series, reproduced in a scratch directory and held to the hashes patches/train.toml records.
The build is a list of named steps over one `BuildPlan`: collect the facts (pin, series,
the tag's FlashInfer range: its own pin ∩ VERIFIED.toml), stage a package tree with a
generated pyproject.toml in a temporary directory (vendor/ is never written), and run
PyPA `build` with hatchling.
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
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from release.core.errors import (
    BadInputError,
    BadPatchLevelError,
    BuildError,
    ToolMissingError,
    TrainDriftError,
    UnverifiedFlashInferError,
)
from release.core.git import commit_time, head_commit
from release.core.hashing import sha256_hex
from release.core.layout import UPSTREAM_PACKAGE, UPSTREAM_SUBTREE, Layout, write_files
from release.queue.patch import Patch
from release.queue.pin import Pin
from release.queue.series import Series
from release.queue.verified import flashinfer_range, read_verified

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
class BuildTarget:
    """What one wheel is made of: a tag's pin, its FlashInfer range and its patched subtree."""

    pin: Pin
    flashinfer: str  # the PEP 440 range the wheel requires: the tag's pin ∩ VERIFIED.toml
    subtree: dict[str, bytes] | None = None  # None: vendor/ as it is (the head)


@dataclass(frozen=True)
class BuildResult:
    tag: str
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
    """The head's wheel, from vendor/ (what `python -m release build` makes)."""
    pin = Pin.load(plan.layout.upstream_toml)
    target = BuildTarget(pin, flashinfer_range(plan.layout, pin.tag, pin.flashinfer))
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-build-") as scratch:
        result = build_target(plan, target, Path(scratch))
        return _deliver(result, plan.out)


def build_train(plan: BuildPlan, tags: list[str] | None = None) -> list[BuildResult]:
    """One wheel per train tag (all, or the named ones), each proven against patches/train.toml.

    All or nothing: every tag's FlashInfer range and tree are settled, and every wheel is
    built in a scratch directory, before the first one is copied to `plan.out`.
    """
    from release.train.check import check_train, select
    from release.train.model import Train

    layout = plan.layout
    entries = select(Train.load(layout.train), tags)
    verified = read_verified(layout.verified_toml)
    ranges = {e.tag: verified.range_for(e.flashinfer) for e in entries}
    refused = [e for e in entries if ranges[e.tag] is None]
    if refused:
        raise UnverifiedFlashInferError(
            "; ".join(f"{e.tag} pins {e.flashinfer or 'no flashinfer-python'}" for e in refused)
            + f": no verified FlashInfer satisfies {'it' if len(refused) == 1 else 'them'} "
            f"(verified: {', '.join(verified.versions)}); nothing was built"
        )
    checks = check_train(layout, [e.tag for e in entries])
    bad = [finding for c in checks for finding in c.findings]
    if bad:
        raise TrainDriftError(
            "the train does not reproduce, nothing was built: " + "; ".join(f.line() for f in bad[:5]),
            hint="`python -m release train check` lists every tag and file that differ",
        )
    head = Pin.load(layout.upstream_toml).tag
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-build-") as scratch:
        for entry, checked in zip(entries, checks, strict=True):
            if entry.tag == head:
                # vendor/ is the head; check_train just proved it holds exactly the recorded files.
                target = BuildTarget(Pin.load(layout.upstream_toml), str(ranges[entry.tag]))
            else:
                assert checked.replay is not None  # a check without findings made the tree
                pin = Pin(
                    tag=entry.tag,
                    source=entry.source,
                    subtree=UPSTREAM_SUBTREE,
                    flashinfer=entry.flashinfer,
                    wheel=entry.wheel,
                    wheel_sha256=entry.wheel_sha256,
                    commit=entry.commit,
                    files=entry.pristine,
                )
                target = BuildTarget(pin, str(ranges[entry.tag]), checked.replay.files)
            results.append(build_target(plan, target, Path(scratch) / entry.tag))
        return [_deliver(result, plan.out) for result in results]


def build_target(plan: BuildPlan, target: BuildTarget, scratch: Path) -> BuildResult:
    started = time.perf_counter()
    patches = active_patches(plan.layout)
    level = plan.patch_level if plan.patch_level is not None else max(len(patches), 1)
    version = overlay_version(target.pin.version, level)
    epoch = source_date_epoch(plan.layout.root)
    isolated = _use_isolation(plan.isolation)
    stage = scratch / "src"
    stage_package(plan.layout, stage, version, target, patches, epoch)
    built = run_backend(stage, scratch / "dist", epoch, isolated)
    data = built.read_bytes()
    return BuildResult(
        target.pin.tag,
        built,
        sha256_hex(data),
        len(data),
        time.perf_counter() - started,
        version,
        epoch,
        isolated,
    )


def _deliver(result: BuildResult, out: Path) -> BuildResult:
    out.mkdir(parents=True, exist_ok=True)
    target = out / result.wheel.name
    shutil.copyfile(result.wheel, target)
    return replace(result, wheel=target)


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


def stage_package(
    layout: Layout, stage: Path, version: str, target: BuildTarget, patches: list[Patch], epoch: int
) -> None:
    package = stage / PACKAGE
    ignored = ["__pycache__", "*.pyc", "_build_info.json", "patches"]
    if target.subtree is not None:
        # Another tag of the train: its own subtree and pin replace the head's.
        ignored += ["prepare_finalize", "UPSTREAM.toml"]
    shutil.copytree(layout.overlay, package, ignore=shutil.ignore_patterns(*ignored))
    if target.subtree is not None:
        write_files(package / "prepare_finalize", target.subtree)
        (package / "UPSTREAM.toml").write_text(target.pin.dumps(), encoding="utf-8")
    (package / "patches").mkdir()
    shutil.copyfile(layout.series, package / "patches" / "series")
    for patch in patches:
        shutil.copyfile(layout.patches / patch.name, package / "patches" / patch.name)
    info = build_info(layout, version, target, patches, epoch)
    (package / "_build_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (stage / PTH_NAME).write_text(PTH_LINE, encoding="utf-8")
    (stage / "pyproject.toml").write_text(pyproject(version, target.pin, target.flashinfer), encoding="utf-8")
    (stage / "README.md").write_text(readme(version, target.pin, patches), encoding="utf-8")


def build_info(layout: Layout, version: str, target: BuildTarget, patches: list[Patch], epoch: int) -> BuildInfo:
    pin = target.pin
    return {
        "version": version,
        "vllm_tag": pin.tag,
        "vllm_version": pin.version,
        "vllm_wheel": pin.wheel,
        "vllm_wheel_sha256": pin.wheel_sha256,
        "upstream_source": pin.source,
        "upstream_package": UPSTREAM_PACKAGE,
        "flashinfer_pin": pin.flashinfer,
        "flashinfer_specifier": target.flashinfer,
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
