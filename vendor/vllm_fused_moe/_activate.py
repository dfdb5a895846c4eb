"""Decide, once per process, whether the overlay may serve the subtree; then serve it.

Runs the first time vLLM imports `...fused_moe.prepare_finalize`, so vLLM is already
imported (its parent packages are) and `vllm.__version__` is what we compare.
"""

from __future__ import annotations

import logging
import os
import sys
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location

from vllm_fused_moe import MODE_ENV, _meta
from vllm_fused_moe._finder import TARGET

# Under "vllm." so vLLM's own handler, format and VLLM_LOGGING_LEVEL apply to our lines.
LOGGER_NAME = "vllm.vllm_fused_moe"
MODES = ("on", "off", "strict")


class OverlayMismatchError(ImportError):
    """VLLM_FUSED_MOE=strict and the environment is not the one this overlay was verified for."""


def mode() -> str:
    value = os.environ.get(MODE_ENV, "").strip().lower()
    if value in ("", "1", "true", "yes"):
        return "on"
    if value in ("0", "false", "no"):
        return "off"
    return value


def decide() -> bool:
    log = logger()
    info = _meta.load()
    chosen = mode()
    if chosen not in MODES:
        log.warning("vllm-fused-moe: %s=%r is not one of %s; treating it as 'on'", MODE_ENV, chosen, "/".join(MODES))
        chosen = "on"
    flashinfer = flashinfer_version()
    active, reason = activation(info, chosen, installed_vllm_version(), flashinfer)
    if not active and chosen == "strict":
        raise OverlayMismatchError(f"vllm-fused-moe: {reason} ({MODE_ENV}=strict)")
    if chosen == "off":
        log.info("vllm-fused-moe %s: %s; upstream %s left in place", info["version"], reason, TARGET)
        return False
    if not active:
        log.warning("vllm-fused-moe: %s; not activating, upstream %s left in place", reason, TARGET)
        return False
    if reason:
        log.warning("vllm-fused-moe: %s", reason)

    patches = ", ".join(p["name"].removesuffix(".patch") for p in info["patches"]) or "none"
    log.info(
        "vllm-fused-moe %s activated for vLLM %s: %s.* served from %s (patches: %s; flashinfer-python %s, verified %s)",
        info["version"],
        info["vllm_version"],
        TARGET,
        _meta.SUBTREE,
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


def spec_for(fullname: str) -> ModuleSpec | None:
    """The spec of our file for an upstream module name, or None when we have no such file."""
    if fullname == TARGET:
        return spec_from_file_location(
            fullname, _meta.SUBTREE / "__init__.py", submodule_search_locations=[str(_meta.SUBTREE)]
        )
    relative = fullname[len(TARGET) + 1 :].split(".")
    module_file = _meta.SUBTREE.joinpath(*relative).with_suffix(".py")
    if module_file.is_file():
        return spec_from_file_location(fullname, module_file)
    package = _meta.SUBTREE.joinpath(*relative)
    if (package / "__init__.py").is_file():
        return spec_from_file_location(fullname, package / "__init__.py", submodule_search_locations=[str(package)])
    return None


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
