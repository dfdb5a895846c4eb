"""The import hook that serves the vendored subtree under vLLM's own module names.

Installed by `vllm_fused_moe.pth` (through `_vllm_fused_moe_pth`, the module beside this
package) in every interpreter start-up of the environment (API server, engine core, spawned
workers; forked workers inherit it), before any user code runs. It must stay cheap there: it
imports only `os`, `sys` and `_vllm_fused_moe_pth` (all loaded already), and decides whether to
activate (vLLM version, FlashInfer range, VLLM_FUSED_MOE) the first time the subtree is imported.

The kill switch comes first, in `_vllm_fused_moe_pth`: with VLLM_FUSED_MOE=off nothing of the
package is imported, so `off` works whatever else is broken (a corrupt _build_info.json, a
module that no longer imports, files half removed). Any other failure of the overlay leaves
upstream's modules in place with a warning, except in strict mode, where it is an ImportError
inside vLLM's import, as loud as a version mismatch.
"""

from __future__ import annotations

import sys

# The switch and its words live with the .pth's module, which reads them before it imports this package;
# the hook, `info` and the doctor read them from there too (re-exported here).
from _vllm_fused_moe_pth import LOGGER_NAME, MODE_ENV, OFF_WORDS, ON_WORDS, STRICT, TARGET, mode

# typing.TYPE_CHECKING without importing typing at every interpreter start-up; mypy reads any
# name TYPE_CHECKING as true, Python never runs the block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

__all__ = ["LOGGER_NAME", "MODE_ENV", "OFF_WORDS", "ON_WORDS", "STRICT", "TARGET", "OverlayFinder", "install", "mode"]


def accepted() -> str:
    """The values VLLM_FUSED_MOE takes, for a warning about one it does not."""
    return (
        f"off ({', '.join(OFF_WORDS[1:])} mean off too), on ({', '.join(w for w in ON_WORDS[2:])} "
        f"mean on too; unset is on), {STRICT}"
    )


class OverlayFinder:
    """A `sys.meta_path` finder that answers only for this build's target modules (and a target
    package's submodules): one release line's module set, never a parent package."""

    def __init__(self) -> None:
        # None until the subtree is first imported; then the decision holds for the process.
        self.active: bool | None = None
        # {upstream module name: is a package}; read on the first import under vllm., not at start-up.
        self.targets: dict[str, bool] | None = None

    def wants(self, fullname: str) -> bool:
        if not fullname.startswith("vllm."):
            return False  # the cheap answer for every other import, before anything is read
        if self.targets is None:
            self.targets = read_targets()
        for name, package in self.targets.items():
            if fullname == name or (package and fullname.startswith(name + ".")):
                return True
        return False

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if not self.wants(fullname):
            return None
        if self.active is None:
            # In strict mode this raises, so the import of the subtree (and vLLM's start) fails;
            # the decision stays open and the next import raises again.
            self.active = _decide()
        if not self.active:
            return None  # the regular path finder serves upstream's files
        from vllm_fused_moe import _activate

        return _activate.spec_for(fullname)

    def invalidate_caches(self) -> None:  # importlib.invalidate_caches() calls this
        pass


def read_targets() -> dict[str, bool]:
    """The module names this build serves (from _meta), each with whether it is a package."""
    try:
        from vllm_fused_moe import _meta

        return {name: rel.endswith("/") for name, rel in _meta.targets().items()}
    except Exception:
        # Unreadable build facts: the head's package, so that decide() runs and reports the problem.
        return {TARGET: True}


def _decide() -> bool:
    chosen = mode()
    if chosen == "off":
        _log("info", f"vllm-fused-moe: disabled by {MODE_ENV}=off; upstream {TARGET} left in place")
        return False
    try:
        from vllm_fused_moe import _activate

        return _activate.decide()
    except Exception as exc:
        if chosen == "strict":
            if isinstance(exc, ImportError):  # OverlayMismatchError says it all already
                raise
            raise ImportError(f"vllm-fused-moe is broken ({_why(exc)}) and {MODE_ENV}=strict") from exc
        _log(
            "warning",
            f"vllm-fused-moe is broken ({_why(exc)}); not activating, upstream {TARGET} left in place "
            f"(reinstall vllm-fused-moe, or set {MODE_ENV}=off)",
        )
        return False


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _log(level: str, message: str) -> None:
    # Through vLLM's logging configuration (importing vllm.logger applies it; vLLM is being imported
    # anyway); without it a warning still reaches stderr through logging.lastResort.
    import contextlib
    import logging

    with contextlib.suppress(Exception):
        import vllm.logger  # noqa: F401
    getattr(logging.getLogger(LOGGER_NAME), level)(message)


def install() -> None:
    """Put the finder first on sys.meta_path, once per process."""
    if installed_finder() is not None:
        return
    sys.meta_path.insert(0, OverlayFinder())


def installed_finder() -> OverlayFinder | None:
    for finder in sys.meta_path:
        if isinstance(finder, OverlayFinder):
            return finder
    return None
