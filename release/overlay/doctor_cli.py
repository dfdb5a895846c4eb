"""`python -m release doctor --python PYTHON`: ask any environment whether it is affected and fixed.

Runs PYTHON with this checkout's release/overlay/runtime/vllm_fused_moe/doctor.py as a script (standard library only,
so our overlay need not be installed there; when it is, the script reads the installed hook's own
decision) and this checkout's scan data, then prints its report. The exit code is the doctor's:
0 not affected, or fixed and live; 1 affected and not fixed, or fixed but not live; 2 cannot tell,
or vLLM would refuse the command line. PYTHON may be a virtual environment's directory. An
interpreter that gives no report within --timeout seconds is stopped, with its process group:
exit 2. docs/doctor.md has the fields and the JSON schema. The stage is release/overlay/doctor_run.py.
"""

from __future__ import annotations

import argparse

from release.core import flags
from release.core.layout import Layout
from release.overlay.doctor_run import DEFAULT_TIMEOUT, LIVE_TIMEOUT, MAX_TIMEOUT, DoctorOptions, doctor


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Is the vLLM of another environment affected by the FlashInfer NVLink double reduce, and is the "
        "fix live there? Runs that environment's interpreter with this checkout's doctor script "
        "(docs/doctor.md); pass `vllm serve` arguments after `--` to judge one command line."
    )
    parser.add_argument(
        "--python",
        type=flags.path,
        required=True,
        help="the interpreter of the environment to check, or its virtual environment's directory",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"stop the interpreter if it gives no report by then (default {DEFAULT_TIMEOUT:g}, with --live "
        f"{LIVE_TIMEOUT:g}: --live takes 8-20 s, 47-153 s measured the first time after an install); "
        f"at most {MAX_TIMEOUT:g} (a day): more, inf or nan is refused (exit 2)",
    )
    flags.add_json(parser, help="print the report as JSON (docs/doctor.schema.json)")
    parser.add_argument(
        "--live",
        action="store_true",
        help="import vLLM's FlashInfer NVLink prepare/finalize classes there and read output_is_reduced()",
    )
    parser.add_argument(
        "--scan",
        type=flags.path,
        default=None,
        help="scan data (default: this checkout's affected-releases.json, beside the doctor script)",
    )
    parser.add_argument(
        "--index-url",
        default=None,
        help="our package index (where publish's simple/ and requirements/ are), for the fix command",
    )
    parser.add_argument(
        "--evidence-key",
        default=None,
        metavar="KEY",
        help="the key that signs our evidence (ed25519:HEX, or a file with it or a PEM public key): the doctor "
        "verifies the installed wheel's signed evidence at --index-url with it (default: there, "
        "$VLLM_FUSED_MOE_EVIDENCE_KEY, else ~/.config/vllm-fused-moe/evidence-key)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable of the environment `vllm serve` runs with (repeatable), e.g. VLLM_ENABLE_MOE_DP_CHUNK=0",
    )
    parser.add_argument("serve", nargs="*", metavar="-- VLLM_SERVE_ARGS", help="a `vllm serve` command line")


def run(args: argparse.Namespace, layout: Layout) -> int:
    return doctor(
        layout,
        DoctorOptions(
            python=args.python,
            timeout=args.timeout,
            json=args.json,
            live=args.live,
            scan=args.scan,
            index_url=args.index_url,
            evidence_key=args.evidence_key,
            env=tuple(args.env),
            serve=tuple(args.serve),
        ),
    )
