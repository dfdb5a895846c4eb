"""Run by `vllm_fused_moe.pth` at every interpreter start-up of the environment: the kill switch, then the hook.

site.py executes the .pth's one line, `import _vllm_fused_moe_pth; _vllm_fused_moe_pth.install()`, in
every Python process of the environment (pip's included) before any user code runs. This module sits
beside the `vllm_fused_moe` package, not in it, so that it runs whatever state the package is in: it
reads VLLM_FUSED_MOE first, and for a word for off it imports nothing of the package, so `off` works
whatever else is broken (a corrupt _build_info.json, a module that no longer imports, the package half
removed or gone). Otherwise it installs the package's import hook (vllm_fused_moe._finder). When off,
or when the hook cannot be installed, a stand-in finder speaks once, only when vLLM imports the
subtree: an INFO line (off), a warning (upstream runs), or in strict mode an ImportError inside vLLM.

It never raises (site.py would print a traceback at every start-up), imports only `os` and `sys`
(loaded already at start-up), and keeps the words of the switch: the package reads them from here
(vllm_fused_moe._finder.mode()), so the .pth and the hook know the same words. Python 3.10+.

The console script `vllm-fused-moe` enters here too (`main`), for the same reason: where the package
is gone it says so, and how to repair it, instead of a ModuleNotFoundError traceback. What `main`
needs beyond `os` and `sys` it imports when it runs, never at start-up.
"""

import os
import sys

# typing.TYPE_CHECKING without importing typing at every interpreter start-up; mypy reads any name
# TYPE_CHECKING as true, Python never runs the block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

MODE_ENV = "VLLM_FUSED_MOE"
# The words an operator may set VLLM_FUSED_MOE to (case and surrounding blanks do not matter).
# Every common word for "off" means off: an operator who wrote `disabled` meant it. A word not
# listed here warns, naming these, and means on, the default: the fix stays as it would be
# unset, and the warning says the setting had no effect.
OFF_WORDS = ("off", "0", "false", "no", "n", "disable", "disabled", "none", "never")
ON_WORDS = ("", "on", "1", "true", "yes", "y", "enable", "enabled")
STRICT = "strict"
# The head line's package: what the stand-in answers for (the hook reads the build's own targets).
TARGET = "vllm.model_executor.layers.fused_moe.prepare_finalize"
LOGGER_NAME = "vllm.vllm_fused_moe"


def mode() -> str:
    """on (unset or an ON_WORDS), off (an OFF_WORDS), strict, or the word that was set (treated as on)."""
    value = os.environ.get(MODE_ENV, "").strip().lower()
    if value in ON_WORDS:
        return "on"
    if value in OFF_WORDS:
        return "off"
    return value


def install() -> None:
    """What the .pth line calls: the package's import hook, or the stand-in when off or broken."""
    chosen = mode()
    why = "off" if chosen == "off" else None
    if why is None:
        try:
            import vllm_fused_moe._finder

            vllm_fused_moe._finder.install()
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
    if why is not None and not any(isinstance(finder, OverlayStandIn) for finder in sys.meta_path):
        sys.meta_path.insert(0, OverlayStandIn(why, strict=chosen == STRICT))


def main() -> int:
    """The console script `vllm-fused-moe`: the package's command line (vllm_fused_moe.__main__), or,
    where the package cannot be imported (its folder gone, the install record and this module left),
    an `error:` and a `hint:` with the commands that repair it instead of a traceback. Exit 2: the
    doctor cannot run, so it cannot tell."""
    try:
        from vllm_fused_moe.__main__ import main as package_main
    except ImportError as exc:
        print(broken_package(exc), file=sys.stderr)
        return 2
    return package_main()


def broken_package(exc: BaseException) -> str:
    """What `main` says when the package does not import: the reinstall of docs/doctor.md, or the removal."""
    import shlex
    from importlib import metadata

    def version(name: str) -> "str | None":
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    python = shlex.quote(sys.executable)
    ours, vllm = version("vllm-fused-moe") or "?", (version("vllm") or "X").split("+", 1)[0]
    # Our overlay index (the doctor's words.INDEX_ENV; not imported: this must work when our package does not)
    index = os.environ.get("VLLM_FUSED_MOE_OVERLAY_INDEX_URL", "<INDEX_URL>").rstrip("/")
    index = index[: -len("/simple")] if index.endswith("/simple") else index
    return (
        f"error: vllm-fused-moe {ours} is recorded as installed, but its package does not import "
        f"({type(exc).__name__}: {exc})\n"
        f"hint: reinstall it (pip keeps a recorded install as it is unless forced): {python} -m pip install "
        f"--force-reinstall --no-deps --no-index --find-links {index}/simple/vllm-fused-moe/ "
        f"-r {index}/requirements/vllm-{vllm}.txt && {python} -m pip check; or, where vLLM {vllm} needs no "
        f"overlay, remove it: {python} -m pip uninstall -y vllm-fused-moe (docs/doctor.md)"
    )


class OverlayStandIn:
    """A `sys.meta_path` finder in place of the hook, when it is off or broken: it never serves a file,
    and says so once, when vLLM imports the subtree (or fails that import, in strict mode)."""

    def __init__(self, why: str, strict: bool) -> None:
        self.why = why  # "off", or the error that kept the hook from being installed
        self.strict = strict
        self.spoke = False

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> "ModuleSpec | None":
        if fullname != TARGET and not fullname.startswith(TARGET + "."):
            return None
        if self.why != "off" and self.strict:
            raise ImportError(f"vllm-fused-moe is broken ({self.why}) and {MODE_ENV}=strict")
        if not self.spoke:
            self.spoke = True
            self._say()
        return None  # the regular path finder serves upstream's files

    def _say(self) -> None:
        try:  # logging only here, when vLLM imports the subtree, never at interpreter start-up
            import logging

            log = logging.getLogger(LOGGER_NAME)
            if self.why == "off":
                log.info("vllm-fused-moe: disabled by %s=off; upstream %s left in place", MODE_ENV, TARGET)
            else:
                log.warning(
                    "vllm-fused-moe is broken (%s); upstream %s runs unpatched "
                    "(reinstall vllm-fused-moe, or set %s=off)",
                    self.why,
                    TARGET,
                    MODE_ENV,
                )
        except Exception:
            pass

    def invalidate_caches(self) -> None:  # importlib.invalidate_caches() calls this
        pass
