"""`python -m release doctor --python PYTHON`: ask any environment whether it is affected and fixed.

Runs PYTHON with this checkout's vendor/vllm_fused_moe/doctor.py as a script (standard library only,
so our overlay need not be installed there; when it is, the script reads the installed hook's own
decision) and this checkout's scan data, then prints its report. The exit code is the doctor's:
0 not affected, or fixed and live; 1 affected and not fixed, or fixed but not live; 2 cannot tell.
docs/doctor.md has the fields and the JSON schema.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from release.core.errors import DoctorError
from release.core.layout import Layout

SCRIPT = "doctor.py"
SCAN = "affected-releases.json"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Is the vLLM of another environment affected by the FlashInfer NVLink double reduce, and is the "
        "fix live there? Runs that environment's interpreter with this checkout's doctor script "
        "(docs/doctor.md); pass `vllm serve` arguments after `--` to judge one command line."
    )
    parser.epilog = (
        "doctor exit codes: 0 not affected, or fixed and live; 1 affected and not fixed, or fixed but "
        "not live; 2 cannot tell (the report says why), or the interpreter gave no report"
    )
    parser.add_argument("--python", type=Path, required=True, help="the interpreter of the environment to check")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (docs/doctor.schema.json)")
    parser.add_argument(
        "--live",
        action="store_true",
        help="import vLLM's FlashInfer NVLink prepare/finalize classes there and read output_is_reduced()",
    )
    parser.add_argument(
        "--scan", type=Path, default=None, help=f"scan data (default: vendor/vllm_fused_moe/{SCAN} of this checkout)"
    )
    parser.add_argument("--index-url", default=None, help="our package index, for the fix command")
    parser.add_argument("serve", nargs="*", metavar="-- VLLM_SERVE_ARGS", help="a `vllm serve` command line")


def command(args: argparse.Namespace, layout: Layout) -> list[str]:
    script = layout.overlay / SCRIPT
    scan = args.scan if args.scan is not None else layout.overlay / SCAN
    argv = [str(args.python), str(script), "--json"]
    if args.scan is not None or scan.is_file():
        argv += ["--scan", str(scan.resolve())]
    if args.live:
        argv.append("--live")
    if args.index_url:
        argv += ["--index-url", args.index_url]
    if args.serve:
        argv += ["--", *args.serve]
    return argv


def run(args: argparse.Namespace, layout: Layout) -> int:
    python: Path = args.python
    if not python.is_file() or not os.access(python, os.X_OK):
        raise DoctorError(f"--python {python} is not an executable file")
    argv = command(args, layout)
    # stderr passes through: with --live it carries vLLM's own import-time log lines.
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
    try:
        data: dict[str, Any] = json.loads(proc.stdout)
        code = int(data["exit_code"])
    except (ValueError, KeyError, TypeError):
        raise DoctorError(
            f"{python} gave no doctor report (exit {proc.returncode}): {proc.stdout.strip()[-500:] or 'no output'}"
        ) from None
    if args.json:
        sys.stdout.write(proc.stdout)
    else:
        print(_doctor_module(layout).format_report(data))
    return code


def _doctor_module(layout: Layout) -> Any:
    """The same doctor.py, loaded by path here only to format its report (it is standard library only)."""
    spec = importlib.util.spec_from_file_location("vllm_fused_moe_doctor_script", layout.overlay / SCRIPT)
    if spec is None or spec.loader is None:
        raise DoctorError(f"cannot load {layout.overlay / SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
