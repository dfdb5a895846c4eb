"""The import hook that serves the vendored subtree under vLLM's own module names.

Installed by `vllm_fused_moe.pth` in every interpreter start-up of the environment (API
server, engine core, spawned workers; forked workers inherit it), before any user code
runs. It must stay cheap there: it imports only `sys`, and decides whether to activate
(vLLM version, FlashInfer range, VLLM_FUSED_MOE) the first time the subtree is imported.
"""

from __future__ import annotations

import sys

# typing.TYPE_CHECKING without importing typing at every interpreter start-up; mypy reads any
# name TYPE_CHECKING as true, Python never runs the block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

TARGET = "vllm.model_executor.layers.fused_moe.prepare_finalize"
_SUBMODULE_PREFIX = TARGET + "."


class OverlayFinder:
    """A `sys.meta_path` finder that answers only for TARGET and its submodules."""

    def __init__(self) -> None:
        # None until the subtree is first imported; then the decision holds for the process.
        self.active: bool | None = None

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname != TARGET and not fullname.startswith(_SUBMODULE_PREFIX):
            return None
        from vllm_fused_moe import _activate

        if self.active is None:
            # In strict mode this raises, so the import of the subtree (and vLLM's start) fails;
            # the decision stays open and the next import raises again.
            self.active = _activate.decide()
        if not self.active:
            return None  # the regular path finder serves upstream's files
        return _activate.spec_for(fullname)

    def invalidate_caches(self) -> None:  # importlib.invalidate_caches() calls this
        pass


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
