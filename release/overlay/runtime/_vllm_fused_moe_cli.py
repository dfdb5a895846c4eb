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
    # Our overlay index: the doctor's --index-url, else its words.INDEX_ENV (not imported: this must work
    # when our package does not), without credentials and control characters: it is printed.
    known = safe_url(given_index_url(sys.argv[1:]) or os.environ.get("VLLM_FUSED_MOE_OVERLAY_INDEX_URL", ""))
    known = known.rstrip("/")
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


def given_index_url(argv: "list[str]") -> "str | None":
    """The value of the doctor's `--index-url URL` (or `--index-url=URL`) in `argv`, before any `--`."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--index-url" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--index-url="):
            return arg.partition("=")[2]
    return None


def safe_url(url: str) -> str:
    """`url` as it may be printed: its credentials out (`https://****@host/`), none where it holds a control
    character or a space (it is then no URL; the hint keeps the placeholder). The doctor's _doctor/reading.py
    has the same rule; this module runs where that package is gone."""
    import re

    if re.search(r"[\x00-\x20\x7f-\x9f\u2028\u2029]", url):
        return ""
    scheme, sep, rest = url.partition("://")
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    end = min(ends) if ends else len(rest)
    if sep and "@" in rest[:end]:
        rest = "****@" + rest[:end].rpartition("@")[2] + rest[end:]
    return scheme + sep + rest
