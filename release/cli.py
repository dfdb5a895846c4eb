"""The command line: `python -m release COMMAND`.

One registry (`COMMANDS`) names every command, the module that configures and runs it,
and the exit codes it can return; `--help` of each command lists exactly those. Errors
are caught here once, printed as one `error:` line plus a `hint:` line, and turned into
their exit code (release.core.errors).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from release.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_INFRASTRUCTURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    ReleaseError,
)
from release.core.layout import Layout

# What each exit code means, in one place; each command lists the ones it can return.
EXIT_MEANINGS: dict[int, str] = {
    EXIT_OK: "done",
    EXIT_FAILED: "failed: check found drift, a tool failed, or a gate was not met",
    EXIT_BAD_INPUT: "bad input (unknown tag, unreadable source, malformed patch or series, dirty vendor/); "
    "nothing was changed",
    EXIT_CONFLICT: "conflict: a patch neither applies nor is upstream; vendor/ and patches/ are unchanged "
    "and the report names the work directory to continue from",
    EXIT_INFRASTRUCTURE: "the run measured nothing: install, server or transport broke",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


class Runner(Protocol):
    def __call__(self, args: argparse.Namespace, layout: Layout) -> int: ...


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # holds configure[_SUFFIX](parser) and run[_SUFFIX](args, layout)
    help: str
    exit_codes: tuple[int, ...]
    suffix: str = ""  # for modules that hold several commands (queue.cli: check, status)

    def load(self) -> tuple[object, Runner]:
        loaded = importlib.import_module(self.module)
        end = f"_{self.suffix}" if self.suffix else ""
        return getattr(loaded, f"configure{end}"), getattr(loaded, f"run{end}")


_COMMON = (EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED)
COMMANDS: tuple[Command, ...] = (
    Command("rebase", "release.rebase.cli", "move vendor/ and patches/ onto another vLLM tag",
            (*_COMMON, EXIT_CONFLICT)),
    Command("check", "release.queue.cli", "verify vendor/ == pristine(UPSTREAM.toml) + series", _COMMON, "check"),
    Command("status", "release.queue.cli", "the pinned tag, the patches and their states", _COMMON, "status"),
    Command("tags", "release.rebase.tags", "list vLLM release tags newer than the pin", _COMMON),
    Command("build", "release.overlay.build_cli", "build the overlay wheel into dist/", _COMMON),
    Command("publish", "release.overlay.publish_cli", "add wheels to a PEP 503 index directory", _COMMON),
    Command("upstream-pr", "release.upstream_pr.cli", "turn a patch into an upstream vLLM pull request", _COMMON),
    Command("gsm8k", "release.gsm8k.cli", "GSM8K 5-shot smoke against a real `vllm serve`",
            (*_COMMON, EXIT_INFRASTRUCTURE)),
)  # fmt: skip


def exit_codes_text(codes: tuple[int, ...]) -> str:
    return "exit codes:\n" + "\n".join(f"  {code}  {EXIT_MEANINGS[code]}" for code in sorted(codes))


def build_parser() -> argparse.ArgumentParser:
    every = tuple(sorted({code for command in COMMANDS for code in command.exit_codes}))
    parser = argparse.ArgumentParser(
        prog="python -m release",
        description="Maintain the vendored vLLM fused-MoE code, its patch series and the overlay wheels.",
        epilog=exit_codes_text(every),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=None, help="the checkout to work on (default: this one)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        configure, runner = command.load()
        sub = commands.add_parser(
            command.name,
            help=command.help,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        configure(sub)  # type: ignore[operator]
        # A command may write its own epilog (sources, notes); the exit codes always end it.
        sub.epilog = (sub.epilog + "\n\n" if sub.epilog else "") + exit_codes_text(command.exit_codes)
        sub.set_defaults(func=runner)
    return parser


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
        print("interrupted; vendor/ and patches/ are only ever changed in one journaled swap", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        # The last net under every command: the disk said no (full, read-only, gone). One line, never a traceback.
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        print("hint: a swap cut short is finished by the next command; see docs/guarantees.md", file=sys.stderr)
        return EXIT_FAILED
