"""Decide, once per process, whether the overlay may serve the subtree; then serve it.

Runs the first time vLLM imports `...fused_moe.prepare_finalize`, so vLLM is already
imported (its parent packages are) and `vllm.__version__` is what we compare.
"""

from __future__ import annotations

import logging
import sys
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path

from vllm_fused_moe import MODE_ENV, _meta
from vllm_fused_moe._finder import LOGGER_NAME, TARGET, accepted, mode

MODES = ("on", "off", "strict")


class OverlayMismatchError(ImportError):
    """VLLM_FUSED_MOE=strict and the environment is not the one this overlay was verified for."""


def decide() -> bool:
    chosen = mode()
    log = logger()
    if chosen not in MODES:
        log.warning(
            "vllm-fused-moe: %s=%r is not a value it knows; treating it as 'on'. It takes: %s",
            MODE_ENV,
            chosen,
            accepted(),
        )
        chosen = "on"
    if chosen == "off":  # the finder answers off before it imports this module; kept for direct callers
        log.info("vllm-fused-moe: disabled by %s=off; upstream %s left in place", MODE_ENV, TARGET)
        return False
    info = _meta.load()
    flashinfer = flashinfer_version()
    active, reason = activation(info, chosen, installed_vllm_version(), flashinfer)
    missing = files_problem()
    if active and missing:
        # A half-removed package: the decision says yes, but there is nothing to serve.
        active, reason = False, missing
    if not active and chosen == "strict":
        raise OverlayMismatchError(f"vllm-fused-moe: {reason} ({MODE_ENV}=strict)")
    if not active:
        log.warning("vllm-fused-moe: %s; not activating, upstream %s left in place", reason, TARGET)
        return False
    if reason:
        log.warning("vllm-fused-moe: %s", reason)

    patches = ", ".join(p["name"].removesuffix(".patch") for p in info["patches"]) or "none"
    log.info(
        "vllm-fused-moe %s activated for vLLM %s: %s served from %s (patches: %s; flashinfer-python %s, verified %s)",
        info["version"],
        info["vllm_version"],
        ", ".join(_meta.targets()),
        _meta.HERE,
        patches,
        flashinfer or "not installed",
        info["flashinfer_specifier"],
    )
    return True


def activation(
    info: _meta.BuildInfo, chosen: str, vllm_installed: str | None, flashinfer: str | None
) -> tuple[bool, str | None]:
    """The hook's decision without its effects: (active, reason). decide() acts on it; the doctor reports it.

    Not active: the reason is VLLM_FUSED_MOE=off, the vLLM version, or (strict only) the FlashInfer
    range. Active: the reason is the FlashInfer warning, or None.
    """
    if chosen not in MODES:
        chosen = "on"
    if chosen == "off":
        return False, f"disabled by {MODE_ENV}=off"
    problem = vllm_problem(info, vllm_installed)
    if problem:
        return False, problem
    problem = flashinfer_problem(flashinfer, info["flashinfer_specifier"])
    if problem and chosen == "strict":
        return False, problem
    return True, problem


def files_problem() -> str | None:
    """Why our copy of what this build serves cannot be served (a damaged install), or None.

    Every file the build recorded (`_build_info.json` `files`, with its sha256): one module
    deleted or changed is enough, since vLLM would then import a package of ours that lacks it
    (a ModuleNotFoundError inside vLLM) or run bytes nobody built. Builds that recorded no files:
    every target of the build's release line (`_meta.targets()`) must at least be there.
    """
    recorded = _meta.load().get("files")
    if recorded:
        return _recorded_files_problem(recorded)
    for rel in _meta.targets().values():
        path = _meta.HERE / rel.rstrip("/")
        wanted = path / "__init__.py" if rel.endswith("/") else path
        if not wanted.is_file():
            return f"the overlay's files are missing ({wanted}); reinstall vllm-fused-moe"
    return None


def _recorded_files_problem(recorded: object) -> str | None:
    import hashlib  # only here, on the first import of the subtree, never at interpreter start-up

    if not isinstance(recorded, dict):
        return f"the file list in {_meta.BUILD_INFO} is unreadable; reinstall vllm-fused-moe"
    damaged = []
    for rel, digest in sorted(recorded.items()):
        parts = str(rel).split("/")
        if not isinstance(digest, str) or str(rel).startswith("/") or any(p in ("", ".", "..") for p in parts):
            return f"the file list in {_meta.BUILD_INFO} is unreadable ({rel!r}); reinstall vllm-fused-moe"
        try:
            data = _meta.HERE.joinpath(*parts).read_bytes()
        except OSError:  # gone, a directory now, unreadable: nothing we can serve
            damaged.append(f"{rel} is missing")
            continue
        if hashlib.sha256(data).hexdigest() != digest:
            damaged.append(f"{rel} is not the file the build made")
    if not damaged:
        return None
    more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
    return f"the overlay's files are damaged in {_meta.HERE}: {damaged[0]}{more}; reinstall vllm-fused-moe"


def spec_for(fullname: str) -> ModuleSpec | None:
    """The spec of our file for an upstream module name, or None when we have no such file."""
    targets = _meta.targets()
    rel = targets.get(fullname)
    if rel is not None:
        return _spec(fullname, _meta.HERE / rel.rstrip("/"), rel.endswith("/"))
    for name, rel in targets.items():
        if rel.endswith("/") and fullname.startswith(name + "."):
            base = _meta.HERE / rel.rstrip("/")
            relative = fullname[len(name) + 1 :].split(".")
            if base.joinpath(*relative).with_suffix(".py").is_file():
                return _spec(fullname, base.joinpath(*relative).with_suffix(".py"), False)
            if (base.joinpath(*relative) / "__init__.py").is_file():
                return _spec(fullname, base.joinpath(*relative), True)
    return None


def _spec(fullname: str, path: Path, package: bool) -> ModuleSpec | None:
    if package:
        return spec_from_file_location(fullname, path / "__init__.py", submodule_search_locations=[str(path)])
    return spec_from_file_location(fullname, path) if path.is_file() else None


def installed_vllm_version() -> str | None:
    module = sys.modules.get("vllm")
    version = getattr(module, "__version__", None)
    if version:
        return str(version)
    from importlib import metadata

    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def vllm_problem(info: _meta.BuildInfo, installed: str | None = None) -> str | None:
    """Why this vLLM is not the one the overlay was built for, or None."""
    installed = installed if installed is not None else installed_vllm_version()
    if installed is None:
        return f"vLLM is not installed (built for {info['vllm_tag']})"
    # A local label (vLLM's own +cu129 builds) is the same source as the public release.
    if _public(installed) != _public(info["vllm_version"]):
        return f"built for vLLM {info['vllm_tag']}, but vLLM {installed} is installed"
    return None


def flashinfer_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("flashinfer-python")
    except metadata.PackageNotFoundError:
        return None


def flashinfer_problem(installed: str | None, specifier: str) -> str | None:
    """Why the installed FlashInfer is outside the verified range, or None.

    Not installed is no problem: the NVLink prepare/finalize classes are then never used.
    """
    if installed is None:
        return None
    try:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # vLLM depends on packaging; without it we cannot judge, so say so
        return f"cannot check flashinfer-python {installed} against the verified range {specifier} (no 'packaging')"
    try:
        inside = SpecifierSet(specifier).contains(Version(installed), prereleases=True)
    except InvalidVersion:
        inside = False
    if inside:
        return None
    return (
        f"flashinfer-python {installed} is outside the verified range {specifier}; the patched "
        "output_is_reduced() relies on its combine summing over top-k (docs/contract.md)"
    )


def _public(version: str) -> str:
    try:
        from packaging.version import Version

        return Version(version).public
    except Exception:
        return version.split("+", 1)[0]


def logger() -> logging.Logger:
    try:
        # Importing vllm.logger applies vLLM's logging configuration if nothing has yet.
        from vllm.logger import init_logger

        vllm_log: logging.Logger = init_logger(LOGGER_NAME)
        return vllm_log
    except Exception:
        log = logging.getLogger(LOGGER_NAME)
        if not log.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
        return log
