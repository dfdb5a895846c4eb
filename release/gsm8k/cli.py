"""`python -m release gsm8k` / `nox -s gsm8k -- ...`: configure(parser) adds the options; run(args) checks them,
builds the SmokeConfig and calls the stage, release/gsm8k/gate.py's `run_gate`."""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shlex
from pathlib import Path

from release.core import flags
from release.core.errors import BadInputError
from release.core.layout import Layout
from release.gsm8k import dataset
from release.gsm8k.gate import GateOptions, run_gate
from release.gsm8k.progress import note
from release.gsm8k.scoring import FLEXIBLE, METRICS, STRICT
from release.gsm8k.server import BACKENDS, UPSTREAM_REPORT_SERVE_ARGS
from release.gsm8k.smoke import SCORERS, SmokeConfig
from release.gsm8k.venvs import pinned_vllm_version, require_gpu

DEFAULT_THRESHOLD = 0.90
DEFAULT_CONCURRENCY = 32  # the upstream report's num_concurrent

# The exit codes follow (release/cli.py's registry says what each means for gsm8k).
GATED_RUN_HELP = """\
The gated run is the --without-patches run when that is given, else the run with the fix
(also under --compare, where the run without the fix is evidence, not gated).
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "GSM8K 5-shot smoke: serve MODEL with `vllm serve` and a FlashInfer all-to-all backend, "
        "score it the way lm-eval's gsm8k task does, gate on a threshold and write a report."
    )
    parser.epilog = GATED_RUN_HELP

    what = parser.add_argument_group("what to serve")
    what.add_argument("--model", required=True, help="model name or path given to `vllm serve`")
    what.add_argument(
        "--backend",
        required=True,
        choices=BACKENDS,
        metavar="BACKEND",
        help="the --all2all-backend to test: " + ", ".join(BACKENDS),
    )
    what.add_argument("--tp", type=int, default=2, help="--tensor-parallel-size (default: 2)")
    what.add_argument("--dp", type=int, default=2, help="--data-parallel-size (default: 2)")
    what.add_argument(
        "--no-expert-parallel",
        action="store_true",
        help="leave out --enable-expert-parallel (the all2all backends only run with it)",
    )
    what.add_argument(
        "--serve-args",
        default=None,
        metavar="'ARGS'",
        help="extra `vllm serve` arguments, one shell-quoted string, replacing the upstream report's "
        f"default: '{shlex.join(UPSTREAM_REPORT_SERVE_ARGS)}'",
    )

    what.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set an environment variable for `vllm serve` (repeatable); before vLLM 0.20, "
        "VLLM_ENABLE_MOE_DP_CHUNK=0 takes the MoE layer's own reduce path (docs/gsm8k.md)",
    )

    which = parser.add_argument_group("which vLLM")
    mode = which.add_mutually_exclusive_group()
    mode.add_argument(
        "--without-patches", action="store_true", help="serve upstream vLLM alone, without our wheel (the bug)"
    )
    mode.add_argument(
        "--compare",
        action="store_true",
        help="run without the fix, then with it, and report the delta (the release evidence)",
    )
    which.add_argument(
        "--index",
        type=flags.path,
        default=None,
        help="our PEP 503 index directory (holding simple/); the wheel comes from it alone (default: ./index)",
    )
    which.add_argument("--wheel-version", default=None, help="pin vllm-fused-moe to this version (default: newest)")
    which.add_argument(
        "--vllm-version",
        default=None,
        help="the vLLM release to serve (default: the tag vendor/ was built from, UPSTREAM.toml's)",
    )
    which.add_argument(
        "--vllm-index-url",
        default=None,
        help="pip --index-url for vLLM and its dependencies (default: pip's own configuration)",
    )
    which.add_argument(
        "--venv",
        type=flags.path,
        default=None,
        help="use this existing env for the run with the fix; skips the install",
    )
    which.add_argument(
        "--upstream-venv",
        type=flags.path,
        default=None,
        help="use this existing env for the run without the fix; skips the install",
    )
    which.add_argument(
        "--work-dir",
        type=flags.path,
        default=None,
        help="where fresh venvs are created (default: ./.work/gsm8k)",
    )

    evaluation = parser.add_argument_group("evaluation")
    evaluation.add_argument("--limit", type=int, default=None, help="score only the first N test questions")
    evaluation.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"lowest passing exact match of the gated run (default: {DEFAULT_THRESHOLD})",
    )
    evaluation.add_argument(
        "--gate-metric",
        choices=METRICS,
        default=STRICT,
        help=f"which score the threshold applies to (default: {STRICT}; {FLEXIBLE} is reported too)",
    )
    evaluation.add_argument(
        "--scorer",
        choices=SCORERS,
        default="auto",
        help="lm-eval: the upstream report's `lm_eval --model local-completions` (needs the HF hub); "
        "builtin: the same prompts and scoring here, on the local data copy; auto (default): lm-eval "
        "when installed and HF_HUB_OFFLINE/HF_DATASETS_OFFLINE are not 1, falling back to builtin if it fails",
    )
    evaluation.add_argument(
        "--data",
        type=flags.path,
        default=None,
        help="directory with test.jsonl and train.jsonl (default: ../shared/data/gsm8k beside the checkout)",
    )
    evaluation.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"requests in flight at once (default: {DEFAULT_CONCURRENCY})",
    )
    evaluation.add_argument("--max-tokens", type=int, default=256, help="max_tokens per completion (default: 256)")
    evaluation.add_argument(
        "--request-timeout", type=float, default=600.0, help="seconds per completions request (default: 600)"
    )

    server = parser.add_argument_group("server")
    server.add_argument("--host", default="127.0.0.1", help="address the server binds (default: 127.0.0.1)")
    server.add_argument("--port", type=int, default=0, help="server port (default: 0, a free one per run)")
    server.add_argument(
        "--health-timeout",
        type=float,
        default=1800.0,
        help="seconds to wait for /health after start (default: 1800; loading a 120B model is slow)",
    )
    flags.add_report(
        parser,
        help="report directory (default: ./reports/gsm8k/<UTC time>-<backend>); "
        "gets report.md, report.json, server and install logs, per-question samples",
    )


def _validate(args: argparse.Namespace) -> None:
    checks = [
        (args.tp >= 1, "--tp must be at least 1"),
        (args.dp >= 1, "--dp must be at least 1"),
        (args.limit is None or args.limit >= 1, "--limit must be at least 1"),
        (0.0 <= args.threshold <= 1.0, "--threshold is an exact-match fraction in [0, 1]"),
        (args.concurrency >= 1, "--concurrency must be at least 1"),
        (args.max_tokens >= 1, "--max-tokens must be at least 1"),
        (args.health_timeout > 0, "--health-timeout must be positive"),
        (args.request_timeout > 0, "--request-timeout must be positive"),
        (0 <= args.port <= 65535, "--port must be in 0..65535"),
        *(
            (bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", item, re.S)), f"--server-env {item!r} is not NAME=VALUE")
            for item in args.server_env
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise BadInputError(message)
    needs_fixed = not args.without_patches
    if needs_fixed and args.venv is None and not (args.index / "simple").is_dir():
        raise BadInputError(
            f"--index {args.index} has no simple/ directory",
            hint="publish the wheel into the index first, or pass --venv with the wheel already installed",
        )
    for option, path in (("--venv", args.venv), ("--upstream-venv", args.upstream_venv)):
        if path is not None and not (path / "bin" / "python").exists():
            raise BadInputError(f"{option} {path} is not a virtual environment (no bin/python)")


def with_defaults(
    args: argparse.Namespace, layout: Layout, started_at: dt.datetime | None = None
) -> argparse.Namespace:
    """The arguments with the defaults that are places in the checkout filled in: the one `--root` names,
    else the one this program works on (Layout.default()), never this file's. Given again, it changes nothing."""
    stamp = f"{(started_at or dt.datetime.now(dt.UTC)).strftime('%Y%m%dT%H%M%SZ')}-{args.backend}"
    return argparse.Namespace(
        **{
            **vars(args),
            "index": args.index or layout.root / "index",
            "work_dir": args.work_dir or layout.root / ".work" / "gsm8k",
            "report": args.report or layout.root / "reports" / "gsm8k" / stamp,
        }
    )


def config_from_args(args: argparse.Namespace, report_dir: Path, layout: Layout | None = None) -> SmokeConfig:
    layout = layout or Layout.default()
    args = with_defaults(args, layout)
    extra = tuple(shlex.split(args.serve_args)) if args.serve_args is not None else UPSTREAM_REPORT_SERVE_ARGS
    return SmokeConfig(
        model=args.model,
        backend=args.backend,
        tensor_parallel_size=args.tp,
        data_parallel_size=args.dp,
        enable_expert_parallel=not args.no_expert_parallel,
        serve_extra_args=extra,
        limit=args.limit,
        threshold=args.threshold,
        gate_metric=args.gate_metric,
        scorer=args.scorer,
        data_dir=dataset.find_data_dir(args.data, layout.root),
        data_searched=args.data or dataset.default_data_dir(layout.root),
        concurrency=args.concurrency,
        max_tokens=args.max_tokens,
        request_timeout_s=args.request_timeout,
        health_timeout_s=args.health_timeout,
        host=args.host,
        port=args.port,
        report_dir=report_dir,
        work_dir=args.work_dir,
        index_dir=None if args.without_patches else args.index,
        overlay_version=args.wheel_version,
        vllm_version=args.vllm_version or pinned_vllm_version(layout),
        vllm_index_args=("--index-url", args.vllm_index_url) if args.vllm_index_url else (),
        fixed_venv=args.venv,
        upstream_venv=args.upstream_venv,
        server_env=tuple((name, value) for name, _, value in (item.partition("=") for item in args.server_env)),
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    started_at = dt.datetime.now(dt.UTC)
    args = with_defaults(args, layout, started_at)
    _validate(args)
    variants = (False, True) if args.compare else (not args.without_patches,)
    if any((args.venv if with_patches else args.upstream_venv) is None for with_patches in variants):
        # Before anything is installed or written: vLLM serves on NVIDIA GPUs only, and a vLLM
        # install takes minutes that a machine without one would spend for nothing.
        note(f"GPUs: {require_gpu()}")
    return run_gate(GateOptions(config_from_args(args, args.report, layout), variants, started_at))
