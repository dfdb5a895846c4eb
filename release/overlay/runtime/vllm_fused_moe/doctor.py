"""`vllm-fused-moe doctor`: is this environment affected by the FlashInfer NVLink double reduce, is the fix live?

Two ways to run it, one code:
- `vllm-fused-moe doctor [--json] [--live] [-- VLLM_SERVE_ARGS...]` (or `python -m vllm_fused_moe doctor`)
  in an environment where our overlay is installed: the scan data is the one shipped in the wheel;
- `PYTHON path/to/doctor.py --scan FILE ...`, which is what `python -m release doctor --python PYTHON`
  runs from a checkout: any interpreter, with or without our overlay installed.

This module is the command; its parts, one per question, are the package `_doctor/` beside it
(what is installed, what the command line asks, the verdict, the report). Run as a file, or loaded
by path, it loads that folder under a private name, so that a checkout's copy never shadows the
`vllm_fused_moe` installed in the environment it asks. Standard library only at module level,
Python 3.10+: it must run in whatever environment is asked. Without --live it imports neither torch
nor vLLM (versions come from package metadata). docs/doctor.md: fields, schema, exit codes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads the name as true


def _parts_beside() -> None:
    """Load `_doctor/` beside this file as the package `_vllm_fused_moe_doctor` (once per process)."""
    import importlib.util

    name, folder = "_vllm_fused_moe_doctor", Path(__file__).resolve().with_name("_doctor")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)


if TYPE_CHECKING or __package__:  # vllm_fused_moe.doctor, in the installed package
    from vllm_fused_moe._doctor import attestation, evidence, installed, live, reading, records, serve, verdict, words
    from vllm_fused_moe._doctor.report import format_report, report
else:  # a file: run by a path, or loaded by one (release doctor, the tests)
    import importlib

    _parts_beside()
    attestation, evidence, installed, live, reading, records, serve, verdict, words = (
        importlib.import_module(f"_vllm_fused_moe_doctor.{n}")
        for n in ("attestation", "evidence", "installed", "live", "reading", "records", "serve", "verdict", "words")
    )
    format_report = importlib.import_module("_vllm_fused_moe_doctor.report").format_report
    report = importlib.import_module("_vllm_fused_moe_doctor.report").report

# The doctor's parts under their own names, for whoever loads this file (release doctor, the tests).
ALL2ALL_MODULE, CLASSES, EXIT_CODES = words.ALL2ALL_MODULE, words.CLASSES, words.EXIT_CODES
INDEX_ENV, MODE_ENV, PACKAGE, PROJECT = words.INDEX_ENV, words.MODE_ENV, words.PACKAGE, words.PROJECT
REPORT_SCHEMA, SCAN_NAME, DP_CHUNK_ENV = words.REPORT_SCHEMA, words.SCAN_NAME, words.DP_CHUNK_ENV
Verdict, Status = words.Verdict, words.Status
ScanData, Overlay, Facts, Report, ScanRead = (
    records.ScanData,
    records.Overlay,
    records.Facts,
    records.Report,
    records.ScanRead,
)
report_from_json = records.report_from_json
blank_overlay, overlay_state, compare_fixes = installed.blank_overlay, installed.overlay_state, installed.compare_fixes
load_scan, release_facts, dist_version = installed.load_scan, installed.release_facts, installed.dist_version
live_target, live_classes, reduced_as_built = live.live_target, live.live_classes, live.reduced_as_built
in_releases, serve_facts, serve_layout = serve.in_releases, serve.serve_facts, serve.serve_layout
conclude, overlay_install = verdict.conclude, verdict.overlay_install


def env_pair(text: str) -> tuple[str, str]:
    """`NAME=VALUE` of --env; argparse turns the ValueError into a usage error (exit 2)."""
    name, eq, value = text.partition("=")
    if not eq or not name or "\0" in text:
        raise ValueError(text)
    return name, value


def parser(prog: str = "vllm-fused-moe doctor") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Is this environment's vLLM affected by the FlashInfer NVLink double reduce, "
        "and is the fix live? Exit 0: not affected, or fixed and live, or the command line after -- does "
        "not meet the bug; 1: affected and not fixed, fixed but not live, or live but damaged (a fix is printed); "
        "2: cannot tell, or vLLM would refuse the command line (the report says why), or a bad option.",
        usage=f"{prog} [--json] [--live] [--scan FILE] [--index-url URL] [--evidence-key KEY] [--env NAME=VALUE]... "
        "[-- VLLM_SERVE_ARGS...]",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (docs/doctor.schema.json)")
    p.add_argument(
        "--live",
        action="store_true",
        help="also import vLLM's FlashInfer NVLink prepare/finalize classes (as vLLM does: torch and vLLM "
        "are imported, seconds) and read output_is_reduced(); no GPU needed",
    )
    p.add_argument("--scan", type=Path, default=None, help=f"the scan data to read (default: the {SCAN_NAME} shipped)")
    p.add_argument(
        "--index-url",
        default=None,
        help="our package index (where `publish`'s simple/ and requirements/ are served), for the fix command "
        f"(default: ${INDEX_ENV}, else a placeholder)",
    )
    p.add_argument(
        "--evidence-key",
        default=None,
        metavar="KEY",
        help="the key that signs our evidence, to verify the installed wheel's evidence/<wheel>.intoto.jsonl "
        "at --index-url with: ed25519:HEX (what `python -m release signing-key` prints) or a file holding it or "
        "a PEM public key (default: $VLLM_FUSED_MOE_EVIDENCE_KEY, else ~/.config/vllm-fused-moe/evidence-key); "
        "verifying needs the cryptography package (docs/doctor.md, 'Signed evidence')",
    )
    p.add_argument(
        "--env",
        action="append",
        type=env_pair,
        default=[],
        metavar="NAME=VALUE",
        help="a variable of the environment `vllm serve` runs with, over this process's own (repeatable), "
        f"e.g. {DP_CHUNK_ENV}=0 or {MODE_ENV}=off: every check of the doctor reads it",
    )
    return p


def main(argv: list[str] | None = None, prog: str = "vllm-fused-moe doctor") -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    serve_argv = None
    if "--" in args:
        cut = args.index("--")
        args, serve_argv = args[:cut], args[cut + 1 :]
    checker = parser(prog)
    options = checker.parse_args(args)
    index_url = options.index_url or os.environ.get(INDEX_ENV) or None
    problem = reading.url_problem(index_url) if index_url else None
    if index_url and problem:  # a usage error (exit 2), the URL named without its credentials
        named = "--index-url" if options.index_url else INDEX_ENV
        checker.error(f"{named} {reading.shown(index_url)} is no index URL the doctor can read: {problem}")
    given = dict(options.env)
    # The serve environment is the one every fact is read in: the overlay's switch (VLLM_FUSED_MOE)
    # and, with --live, vLLM's own import see it too. This process exits right after.
    os.environ.update(given)
    done = report(
        str(Path(__file__).resolve()),
        options.scan,
        options.live,
        serve_argv,
        index_url,
        given,
        evidence_key=options.evidence_key,
    )
    print(json.dumps(done.to_json(), indent=2, sort_keys=True) if options.json else format_report(done))
    return done.exit_code


if __name__ == "__main__":
    # Run as a file from a checkout: its directory must not shadow the installed overlay's modules.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]
    sys.exit(main(prog="doctor.py"))
