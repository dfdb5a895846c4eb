"""The console script `vllm-fused-moe`: the package's command line, or, where it does not import, how to repair it.

A module of its own beside the package and beside the .pth's module (`_vllm_fused_moe_pth`), so that
the command speaks whichever of the two is gone: with the package gone it says so, and how to
repair it, instead of a ModuleNotFoundError traceback; with the .pth's module gone the package's
doctor runs and names the missing file. Standard library only, Python 3.10+; what `main` needs
beyond `os` and `sys` it imports when it runs.
"""

import os
import sys


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
    known = os.environ.get("VLLM_FUSED_MOE_OVERLAY_INDEX_URL", "").rstrip("/")
    index = (known[: -len("/simple")] if known.endswith("/simple") else known) or "<INDEX_URL>"
    # A placeholder is no command that runs as pasted: say what goes there.
    placeholder = (
        " (<INDEX_URL>: where our index is served, the requirements file you installed from up to "
        "/requirements/; or set VLLM_FUSED_MOE_OVERLAY_INDEX_URL)"
    )
    where = "" if known else placeholder
    return (
        f"error: vllm-fused-moe {ours} is recorded as installed, but its package does not import "
        f"({type(exc).__name__}: {exc})\n"
        f"hint: reinstall it (pip keeps a recorded install as it is unless forced): {python} -m pip install "
        f"--force-reinstall --no-deps --no-index --find-links {index}/simple/vllm-fused-moe/ "
        f"-r {index}/requirements/vllm-{vllm}.txt && {python} -m pip check; or, where vLLM {vllm} needs no "
        f"overlay, remove it: {python} -m pip uninstall -y vllm-fused-moe{where} (docs/doctor.md)"
    )
