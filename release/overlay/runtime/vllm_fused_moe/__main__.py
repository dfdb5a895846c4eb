"""`python -m vllm_fused_moe [info] [--json]` (also `vllm-fused-moe info`): what is deployed.

`vllm-fused-moe doctor ...` (vllm_fused_moe.doctor) answers the other question: is this
environment affected by the double reduce, and is the fix live? (docs/doctor.md)

For whoever debugs a deployment: the vLLM tag this overlay was built for, the patches and
their origins, and whether it would activate with the vLLM and FlashInfer installed here.
It reads package metadata only; it does not import vLLM (which takes seconds).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from importlib import metadata

from vllm_fused_moe import MODE_ENV, _meta

# The hook's modules (_activate, _finder) import the .pth's module, _vllm_fused_moe_pth, beside this
# package: imported where `info` runs, so that `python -m vllm_fused_moe doctor` still runs, and says
# so, when that module is gone.

TRAILERS_SHOWN = ("Origin", "Applied-Upstream", "Depends-On", "Risk", "Forwarded")


class Report(_meta.BuildInfo):
    """The build facts plus what this interpreter has installed (`--json` prints it)."""

    installed: dict[str, str | None]
    mode: str
    hook_installed: bool
    would_activate: bool
    why_not: str | None
    flashinfer_problem: str | None
    what_to_do: str | None
    subtree: str


def report() -> Report:
    from vllm_fused_moe import _activate
    from vllm_fused_moe._finder import installed_finder, mode

    info = _meta.load()
    try:
        vllm_installed: str | None = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        vllm_installed = None
    flashinfer = _activate.flashinfer_version()
    vllm_problem = _activate.vllm_problem(info, vllm_installed) if vllm_installed else "vLLM is not installed"
    chosen = mode()
    # What the hook checks after the version (decide()): a damaged install serves nothing.
    damaged = _activate.files_problem() if chosen != "off" and vllm_problem is None else None
    return {
        **info,
        "installed": {"vllm": vllm_installed, "flashinfer-python": flashinfer},
        "mode": chosen,
        "hook_installed": installed_finder() is not None,
        "would_activate": chosen != "off" and vllm_problem is None and not damaged and installed_finder() is not None,
        "why_not": "disabled by VLLM_FUSED_MOE=off" if chosen == "off" else vllm_problem or damaged,
        "flashinfer_problem": _activate.flashinfer_problem(flashinfer, info["flashinfer_specifier"]),
        "subtree": str(_meta.HERE / next(iter(_meta.targets().values())).rstrip("/")),
        "what_to_do": what_to_do(info, vllm_installed, vllm_problem, chosen),
    }


def what_to_do(info: _meta.BuildInfo, vllm_installed: str | None, vllm_problem: str | None, mode: str) -> str | None:
    """For a vLLM this wheel was not built for: which wheel to install instead, or why there is none."""
    if mode == "off" or not vllm_installed or not vllm_problem:
        return None
    from vllm_fused_moe._doctor.verdict import overlay_install  # only here: `info` on a mismatch

    wanted = vllm_installed.split("+", 1)[0]
    install, check = overlay_install("python", "URL", wanted)
    return (
        f"this wheel is the overlay of vLLM {info['vllm_tag']} only; each affected vLLM release has its own. "
        f"Install the one for vLLM {wanted} from the same index, URL where it is served (docs/overlay.md, "
        f"'Install'): {shlex.join(install)} && {shlex.join(check)}. If the index has no "
        f"requirements/vllm-{wanted}.txt, vLLM {wanted} has no overlay (its release either has the fix already or "
        "is not in the train): uninstall vllm-fused-moe; docs/overlay.md, 'No overlay for your vLLM', says more"
    )


def format_report(data: Report) -> str:
    from vllm_fused_moe import _activate
    from vllm_fused_moe._finder import accepted

    lines = [
        f"vllm-fused-moe {data['version']}",
        f"  built from      commit {data['commit'] or 'unknown'} (SOURCE_DATE_EPOCH {data['source_date_epoch']})",
        f"  vLLM tag        {data['vllm_tag']} ({data['upstream_source']}: {data['vllm_wheel'] or '-'})",
        f"  overlays        {', '.join(n + ('.*' if r.endswith('/') else '') for n, r in _meta.targets().items())}",
        f"  from            {data['subtree']}",
        f"  installed vLLM  {data['installed']['vllm'] or 'not installed'}",
        f"  flashinfer      installed {data['installed']['flashinfer-python'] or 'not installed'}, "
        f"verified {data['flashinfer_specifier']}",
        f"  mode            {MODE_ENV}={data['mode']}",
    ]
    if data["mode"] not in _activate.MODES:
        lines.append(
            f"  warning         {data['mode']!r} is not a value the hook knows; it means on. It takes: {accepted()}"
        )
    if data["would_activate"]:
        lines.append("  status          activates when vLLM imports the subtree")
    elif data["mode"] == "off":
        lines.append(f"  status          does not activate: {data['why_not']}")
    elif not data["hook_installed"]:
        lines.append("  status          hook not installed in this interpreter (vllm_fused_moe.pth not processed?)")
    else:
        lines.append(f"  status          does not activate: {data['why_not']}")
    if data.get("what_to_do"):
        lines.append(f"  what to do      {data['what_to_do']}")
    if data["flashinfer_problem"]:
        lines.append(f"  warning         {data['flashinfer_problem']}")
    lines.append(f"patches ({len(data['patches'])}):")
    for patch in data["patches"]:
        lines.append(f"  {patch['name']}")
        lines.append(f"    {patch['subject']}")
        for key in TRAILERS_SHOWN:
            if key in patch["trailers"]:
                lines.append(f"    {key}: {patch['trailers'][key]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args_given = sys.argv[1:] if argv is None else argv
    if args_given[:1] == ["doctor"]:
        # Its own options, and `-- VLLM_SERVE_ARGS...` that argparse here must not see.
        from vllm_fused_moe import doctor

        return doctor.main(args_given[1:])
    parser = argparse.ArgumentParser(
        prog="vllm-fused-moe",
        description=__doc__.splitlines()[0],
        epilog="vllm-fused-moe doctor --help: is this environment affected, and is the fix live?",
    )
    parser.add_argument("command", nargs="?", default="info", choices=["info", "doctor"])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(args_given)
    try:
        data = report()
    except _meta.BuildInfoError as exc:
        print(
            f"error: {exc}\nhint: reinstall vllm-fused-moe; VLLM_FUSED_MOE=off keeps vLLM working meanwhile",
            file=sys.stderr,
        )
        return 1
    print(json.dumps(data, indent=2, sort_keys=True) if args.json else format_report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
