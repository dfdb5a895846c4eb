"""The command line: `python -m release COMMAND`. Errors are caught here, printed as one
line plus a hint, and turned into the exit codes listed in --help."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from release.errors import EXIT_CONFLICT, EXIT_FAILED, EXIT_OK, ReleaseError
from release.layout import Layout
from release.upstream import DEFAULT_SOURCE

EXIT_CODES = """exit codes:
  0  done (check: vendor/ is clean)
  1  failed: check found drift, a tool failed, or a gate was not met
  2  bad input: unknown tag, missing or unreadable source, dirty vendor/,
     malformed patch or series; nothing was changed
  3  conflict: a patch neither applies nor is upstream; vendor/ and patches/
     are unchanged and the report names the work directory to continue from
"""

SOURCES = f"""sources (--from):
  git+URL    a remote git repository, fetched at the tag only, depth 1, no blobs but
             the subtree's (default: {DEFAULT_SOURCE})
  git:PATH   a local clone (read with ls-tree/cat-file, never checked out)
  dir:PATH   a tree laid out like vLLM's (PATH/vllm/model_executor/...)
  wheel:PATH a vLLM release wheel (only the subtree is read)
  pypi       the release wheel of TAG from the package index, downloaded once with pip
             into $VLLM_FUSED_MOE_CACHE (default ~/.cache/vllm-fused-moe/wheels)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m release",
        description="Maintain the vendored vLLM prepare_finalize subtree and its patch series.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=None, help="the checkout to work on (default: this one)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rebase = commands.add_parser(
        "rebase", help="move vendor/ and patches/ onto another vLLM tag",
        description="Re-vendor the subtree from TAG and replay patches/series on it with `git am --3way` "
                    "(never fuzz). Each patch ends applied (refreshed to the new context), upstream "
                    "(retired to patches/retired/ with Applied-Upstream set) or in conflict (stop; "
                    "vendor/ and patches/ stay byte-for-byte as they were).",
        epilog=SOURCES + "\n" + EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    rebase.add_argument("tag", nargs="?", help="the vLLM release tag, e.g. v0.21.0")
    rebase.add_argument("--from", dest="source", default=DEFAULT_SOURCE, metavar="SOURCE", help="where to read TAG from (see below)")
    rebase.add_argument("--dry-run", action="store_true", help="classify and report; write nothing to vendor/ or patches/")
    rebase.add_argument("--report", type=Path, default=None, metavar="DIR",
                        help="where rebase-report.md and .json go (default: reports/rebase-TAG/)")
    rebase.add_argument("--continue", dest="resume", type=Path, metavar="WORKDIR", help="finish a rebase stopped by a conflict")
    rebase.add_argument("--abort", type=Path, metavar="WORKDIR", help="drop a rebase stopped by a conflict")
    rebase.set_defaults(func=run_rebase)

    check = commands.add_parser("check", help="verify vendor/ == pristine(UPSTREAM.toml) + series",
                                description="Undo the series on a copy of vendor/ and compare every file with the "
                                            "sha256 in UPSTREAM.toml; any hand edit is reported file by file.",
                                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.set_defaults(func=run_check)

    status = commands.add_parser("status", help="the pinned tag, the patches and their states")
    status.set_defaults(func=run_status)

    for name, module, help_text in OPTIONAL_COMMANDS:
        configure, runner = _load_command(module)
        if configure is None:
            continue
        sub = commands.add_parser(name, help=help_text, epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
        configure(sub)
        sub.set_defaults(func=lambda args, layout, _run=runner: _run(args))
    return parser


# Commands that live in their own modules; each has configure(parser) and run(args) -> int.
OPTIONAL_COMMANDS: list[tuple[str, str, str]] = [
    ("build", "release.wheel_cli", "build the overlay wheel into dist/"),
    ("publish", "release.index_cli", "add wheels to a PEP 503 index directory"),
    ("upstream-pr", "release.upstream_pr", "turn a patch into an upstream vLLM pull request"),
    ("gsm8k", "release.gsm8k.cli", "GSM8K 5-shot smoke against a real `vllm serve`"),
    ("tags", "release.tags", "list vLLM release tags newer than the pin"),
]


def _load_command(module: str) -> tuple[Callable | None, Callable | None]:
    import importlib

    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return None, None
        raise
    return loaded.configure, loaded.run


def run_rebase(args: argparse.Namespace, layout: Layout) -> int:
    from release import rebase

    if args.abort:
        rebase.abort(layout, args.abort)
        return EXIT_OK
    if args.resume:
        report = rebase.resume(layout, args.resume)
    else:
        if not args.tag:
            from release.errors import BadInputError

            raise BadInputError("rebase needs a TAG", hint="e.g. `python -m release rebase v0.21.0 --from pypi`")
        report = rebase.rebase(rebase.RebaseOptions(args.tag, args.source, layout, args.dry_run, args.report))
    print(report.to_markdown())
    return EXIT_CONFLICT if report.result == "conflict" else EXIT_OK


def run_check(args: argparse.Namespace, layout: Layout) -> int:
    from release.status import check

    found = check(layout)
    for d in found:
        print(d.line())
    if found:
        print(f"vendor/ drifted from pristine + series in {len(found)} file(s)", file=sys.stderr)
        return EXIT_FAILED
    print("vendor/ is pristine(UPSTREAM.toml) + series")
    return EXIT_OK


def run_status(args: argparse.Namespace, layout: Layout) -> int:
    from release.status import status_lines

    print("\n".join(status_lines(layout)))
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    layout = Layout(args.root.resolve()) if args.root else Layout.default()
    try:
        return int(args.func(args, layout))
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted; vendor/ and patches/ are only ever changed in one final swap", file=sys.stderr)
        return 130
