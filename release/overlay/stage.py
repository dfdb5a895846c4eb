"""A wheel's files staged for the backend: `assemble` puts release/overlay/runtime/ (ours) and upstream's
vendored files and pins together, as site-packages will hold them (neither folder is ever written); then
the series, the build facts (`_build_info.json`), a generated pyproject.toml and README."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import tomli_w

from release.core.git import head_commit
from release.core.hashing import file_sha256
from release.core.layout import BESIDE_SUBTREE, BUILD_INFO_NAME, UPSTREAM_PACKAGE, Layout, write_files
from release.model.lines import Line
from release.model.patch import Patch
from release.model.pin import Pin
from release.overlay.backend import BACKEND, BACKEND_MODULE, BACKEND_VERSION
from release.overlay.project import CLI_MODULE, PACKAGE, PROJECT, PTH_LINE, PTH_MODULE, PTH_NAME
from release.overlay.target import BuildTarget

if TYPE_CHECKING:
    # The overlay package owns the format of the _build_info.json it reads; the tooling only writes it.
    # Not importable at run time (release/overlay/runtime/ is not on sys.path), so for the type checker only.
    from vllm_fused_moe._meta import BuildInfo


def stage_package(
    layout: Layout,
    stage: Path,
    version: str,
    target: BuildTarget,
    patches: list[Patch],
    epoch: int,
    dirty: list[str],
) -> None:
    line = target.line
    package = assemble(layout, stage, line, target.subtree, target.pin if target.subtree is not None else None)
    (package / "patches").mkdir()
    # The series this wheel's files carry: patches/series for the head line, the line's own otherwise.
    (package / "patches" / "series").write_text(target.series, encoding="utf-8")
    for patch in patches:
        (package / "patches" / patch.name).write_text(patch.text, encoding="utf-8")
    targets = line.targets(line.overlay_dir)
    info = build_info(layout, version, target, patches, epoch, targets, dirty, served_files(package, targets))
    (package / BUILD_INFO_NAME).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (stage / "pyproject.toml").write_text(pyproject(version, target.pin, target.flashinfer), encoding="utf-8")
    (stage / "README.md").write_text(readme(version, target.pin, patches), encoding="utf-8")


def assemble(
    layout: Layout,
    stage: Path,
    line: Line,
    subtree: dict[str, bytes] | None = None,
    pin: Pin | None = None,
) -> Path:
    """The wheel's top level in `stage`, as site-packages will hold it; returns the package folder.

    Ours, from release/overlay/runtime/: the .pth's module, the console script's and `vllm_fused_moe/` (the hook, the
    doctor, the scan data). Upstream's, from vendor/vllm_fused_moe/: the vendored subtree (or
    `subtree`, another train tag's replay, with its `pin`) in the line's folder, its LICENSE and
    NOTICE, UPSTREAM.toml and VERIFIED.toml. Without build facts (_build_info.json, patches/), the
    package reads its facts from the pins beside it, as it did in a source checkout.
    """
    package = stage / PACKAGE
    caches = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(layout.runtime_package, package, ignore=caches)
    for module in (PTH_MODULE, CLI_MODULE):
        shutil.copyfile(layout.runtime / f"{module}.py", stage / f"{module}.py")
    write_files(package / line.overlay_dir, subtree if subtree is not None else layout.vendor_files())
    for name in BESIDE_SUBTREE:
        shutil.copyfile(layout.vendored / name, package / name)
    if pin is not None:
        (package / "UPSTREAM.toml").write_text(pin.dumps(), encoding="utf-8")
    (stage / PTH_NAME).write_text(PTH_LINE, encoding="utf-8")
    return package


def served_files(package: Path, targets: dict[str, str]) -> dict[str, str]:
    """{path below the package: sha256} of every file the wheel serves under vLLM's names.

    The hook checks each one before it serves any (vllm_fused_moe._activate.files_problem): a
    module deleted or changed after the install means upstream's modules run, with one warning,
    rather than a ModuleNotFoundError inside vLLM.
    """
    files: dict[str, str] = {}
    for rel in targets.values():
        top = package / rel.rstrip("/")
        found = sorted(p for p in top.rglob("*") if p.is_file()) if rel.endswith("/") else [top]
        for path in found:
            files[path.relative_to(package).as_posix()] = file_sha256(path)
    return files


def build_info(
    layout: Layout,
    version: str,
    target: BuildTarget,
    patches: list[Patch],
    epoch: int,
    targets: dict[str, str] | None = None,
    dirty: list[str] | None = None,
    files: dict[str, str] | None = None,
) -> BuildInfo:
    pin = target.pin
    return {
        "dirty": list(dirty or []),
        "version": version,
        "vllm_tag": pin.tag,
        "vllm_version": pin.version,
        "vllm_wheel": pin.wheel,
        "vllm_wheel_sha256": pin.wheel_sha256,
        "upstream_source": pin.source,
        "upstream_package": pin.subtree.replace("/", "."),
        "targets": targets if targets is not None else {UPSTREAM_PACKAGE: "prepare_finalize/"},
        "files": dict(files or {}),
        "flashinfer_pin": pin.flashinfer,
        "flashinfer_specifier": target.flashinfer,
        "commit": head_commit(layout.root),
        "source_date_epoch": epoch,
        # What the wheel carries, each with the bug it fixes ("" for a downstream change): doctor compares these
        # with the bugs its vLLM release has (the scan data), so a wheel missing a fix is never "fixed-live".
        "patches": [
            {"name": p.name, "subject": p.subject, "bug": p.purpose.bug, "trailers": p.trailers} for p in patches
        ],
    }


def pyproject(version: str, pin: Pin, flashinfer_specifier: str) -> str:
    modules = pin.subtree.rsplit("/", 1)[-1]  # prepare_finalize for the head line, fused_moe for older ones
    wheel_target = {
        "packages": [PACKAGE],
        "force-include": {PTH_NAME: PTH_NAME, **{f"{m}.py": f"{m}.py" for m in (PTH_MODULE, CLI_MODULE)}},
    }
    return tomli_w.dumps(
        {
            "build-system": {"requires": [f"{BACKEND}=={BACKEND_VERSION}"], "build-backend": BACKEND_MODULE},
            "project": {
                "name": PROJECT,
                "version": version,
                "description": f"vLLM {pin.tag} fused-MoE {modules} with the vllm-fused-moe patch series, "
                "activated in place",
                "readme": "README.md",
                "license": "Apache-2.0",
                "requires-python": ">=3.10",
                # No FlashInfer requirement of ours where no carried patch relies on FlashInfer (flashinfer_specifier
                # ""): vLLM's own pin stands.
                "dependencies": [f"vllm=={pin.version}"]
                + ([f"flashinfer-python{flashinfer_specifier}"] if flashinfer_specifier else []),
                # A module beside the package: the script still speaks when the package is gone.
                "scripts": {"vllm-fused-moe": f"{CLI_MODULE}:main"},
            },
            "tool": {"hatch": {"build": {"targets": {"wheel": wheel_target}}}},
        }
    )


def readme(version: str, pin: Pin, patches: list[Patch]) -> str:
    lines = [
        f"# vllm-fused-moe {version}",
        "",
        f"vLLM {pin.tag}'s `{pin.subtree.replace('/', '.')}` modules with these patches, served under the",
        "upstream module names by an import hook (`vllm_fused_moe.pth`). `VLLM_FUSED_MOE=off` disables it,",
        "`VLLM_FUSED_MOE=strict` turns a version mismatch into an error. `vllm-fused-moe info` tells all.",
        "",
    ]
    lines += [f"- {p.name}: {p.subject} (Origin: {p.trailers.get('Origin', 'ours')})" for p in patches]
    return "\n".join(lines) + "\n"
