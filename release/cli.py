"""The command line: `python -m release COMMAND`.

One registry (`COMMANDS`) names every command, the module that configures and runs it,
and the exit codes it can return; `--help` of each command lists exactly those, and
docs/architecture.md holds the table of all of them (`exit_code_table()`, checked by a test).
Errors are caught here once, printed as one `error:` line plus a `hint:` line, and turned
into their exit code (release.core.errors).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from release.core import log
from release.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TRANSPORT,
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
    EXIT_TRANSPORT: "the transport broke: an index, file host, git remote or server did not answer in time, cut "
    "an answer short or answered other than asked (after safe retries); nothing was changed",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


class Runner(Protocol):
    def __call__(self, args: argparse.Namespace, layout: Layout) -> int: ...


Configure = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # holds configure[_SUFFIX](parser) and run[_SUFFIX](args, layout)
    help: str
    exit_codes: tuple[int, ...]
    suffix: str = ""  # for modules that hold several commands (queue.cli: check, status)
    # What a code means for this command, where that says more than EXIT_MEANINGS.
    exit_texts: tuple[tuple[int, str], ...] = ()

    def load(self) -> tuple[Configure, Runner]:
        loaded = importlib.import_module(self.module)
        end = f"_{self.suffix}" if self.suffix else ""
        return getattr(loaded, f"configure{end}"), getattr(loaded, f"run{end}")

    def meaning(self, code: int) -> str:
        return dict(self.exit_texts).get(code, EXIT_MEANINGS[code])


_COMMON = (EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED)
# Every command that reads the network (release/pristine/transport.py, git remotes, the gsm8k server)
# says a broken transport with the same code (upstream-pr: the release wheels its regression test runs
# against); build, publish, doctor, check and status read only local files and processes.
_NETWORK = (*_COMMON, EXIT_TRANSPORT)
_GSM8K_EXITS = (
    (EXIT_OK, "the gated run scored at or above --threshold (and, for a fixed run, the fix is active)"),
    (EXIT_FAILED, "below --threshold, or the fixed wheel's fix is not active (the report says which)"),
    (EXIT_BAD_INPUT, "bad input (options, --data, --index, --venv), or no NVIDIA GPU to install and serve "
     "on (`nvidia-smi -L`); nothing was run"),
    (EXIT_TRANSPORT, "nothing was measured: requests to the server kept failing (the transport broke), install "
     "failed, the server exited or never became healthy, or lm-eval failed (logs are in the report directory)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C or SIGTERM); the server was stopped"),
)  # fmt: skip
COMMANDS: tuple[Command, ...] = (
    Command("rebase", "release.rebase.cli", "move vendor/ and patches/ onto another vLLM tag",
            (*_COMMON, EXIT_CONFLICT, EXIT_TRANSPORT)),
    Command("check", "release.queue.cli", "verify vendor/ == pristine(UPSTREAM.toml) + series", _COMMON, "check"),
    Command("status", "release.queue.cli", "the pinned tag, the patches and their states", _COMMON, "status"),
    Command("pq", "release.pq.cli", "edit the patch queue as git commits, carry a patch to the lines",
            (*_COMMON, EXIT_CONFLICT, EXIT_TRANSPORT),
            exit_texts=((EXIT_FAILED, "`export --check`: patches/ or vendor/ differ from the export; or a tool failed"),
                        (EXIT_BAD_INPUT, "bad input: no or a foreign work tree, work not exported, a commit that is "
                         "no patch (merge, empty, message without the template's answers), dirty vendor/, a "
                         "CRLF or control character in a series, a slug, --reason, --report or --dir refused; "
                         "nothing was changed"),
                        (EXIT_CONFLICT, "`carry`: the head line's series conflicts on one of its train tags (the "
                         "report names it; what was carried onto the other lines is written); `drop`: a later "
                         "patch does not apply without the one dropped (nothing was changed); `import --line`: a "
                         "patch does not merge on the line's tag (the work tree is left at git's conflict)"),
                        (EXIT_TRANSPORT, "`carry`, `import --line`, `export` of a line's tree: the network broke "
                         "while reading a train tag"))),
    Command("train", "release.train.cli", "the release train: add, remove, list, check the tags we ship",
            _NETWORK),
    Command("tags", "release.rebase.tags", "list vLLM release tags newer than the pin", _NETWORK),
    Command("scan", "release.scan.cli", "classify every vLLM release on the index for each patch", _NETWORK),
    Command("build", "release.overlay.build_cli", "build the overlay wheel into dist/", _COMMON),
    Command("publish", "release.overlay.publish_cli", "add wheels to a PEP 503 index directory", _COMMON,
            exit_texts=((EXIT_BAD_INPUT, "bad input: a wheel that is no regular file of at most 1 GiB (a FIFO, a "
                         "device, a directory), not ours, dirty or missing a fix; a clash or an index no publish "
                         "leaves; the index was not changed"),)),
    Command("upstream-pr", "release.upstream_pr.cli", "turn a patch into an upstream vLLM pull request", _NETWORK,
            exit_texts=((EXIT_FAILED, "the regression test did not fail without the patch or did not pass with it "
                         "(every run is named); nothing was written"),)),
    Command("doctor", "release.overlay.doctor_cli", "is an environment affected by the double reduce, is the fix live",
            _COMMON),
    Command("gsm8k", "release.gsm8k.cli", "GSM8K 5-shot smoke against a real `vllm serve`",
            _NETWORK, exit_texts=_GSM8K_EXITS),
)  # fmt: skip


def exit_codes_text(meanings: dict[int, str]) -> str:
    return "exit codes:\n" + "\n".join(f"  {code}  {meanings[code]}" for code in sorted(meanings))


def exit_code_table() -> str:
    """The Markdown table of every command's exit codes that docs/architecture.md holds."""
    rows = ["| code | meaning | returned by |", "| --- | --- | --- |"]
    for code in sorted({code for command in COMMANDS for code in command.exit_codes}):
        names = [command.name for command in COMMANDS if code in command.exit_codes]
        by = "every command" if len(names) == len(COMMANDS) else ", ".join(f"`{name}`" for name in names)
        rows.append(f"| {code} | {EXIT_MEANINGS[code]} | {by} |")
    return "\n".join(rows) + "\n"


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `argv`, only the commands it names are configured.

    Configuring a command imports its module, and some pull in heavy libraries (the wheel reader
    imports requests): `python -m release check` should not pay for them. The list of commands
    and their help come from the registry either way.
    """
    every = {code: EXIT_MEANINGS[code] for command in COMMANDS for code in command.exit_codes}
    parser = argparse.ArgumentParser(
        prog="python -m release",
        description="Maintain the vendored vLLM fused-MoE code, its patch series and the overlay wheels.",
        epilog=exit_codes_text(every) + "\n\nwhat each code means for one command: python -m release COMMAND --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=None, help="the checkout to work on (default: this one)")
    said = parser.add_mutually_exclusive_group()
    said.add_argument(
        "-q",
        "--quiet",
        action="store_const",
        const=log.QUIET,
        dest="verbosity",
        help="say nothing on stderr but warnings and the error: and hint: lines of a failure (no notes, no "
        "progress); stdout, the command's result, is the same",
    )
    said.add_argument(
        "-v",
        "--verbose",
        action="store_const",
        const=log.VERBOSE,
        dest="verbosity",
        help="say more on stderr: each git command and each package index page read, besides the notes",
    )
    parser.set_defaults(verbosity=log.DEFAULT)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        sub = commands.add_parser(
            command.name,
            help=command.help,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if argv is None or command.name in argv:
            configure, runner = command.load()
            configure(sub)
            sub.set_defaults(func=runner)
        # A command may write its own epilog (sources, notes); the exit codes always end it.
        own = exit_codes_text({code: command.meaning(code) for code in command.exit_codes})
        sub.epilog = (sub.epilog + "\n\n" if sub.epilog else "") + own
        for action in sub._actions:  # an action's own --help (`pq export --help`) ends with them too
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    child.formatter_class = argparse.RawDescriptionHelpFormatter
                    child.epilog = (child.epilog + "\n\n" if child.epilog else "") + own
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    log.configure(args.verbosity)
    layout = Layout(args.root.resolve()) if args.root else Layout.default()
    try:
        return int(args.func(args, layout))
    except ReleaseError as exc:
        log.error(f"error: {exc}")
        if exc.hint:
            log.error(f"hint: {exc.hint}")
        return exc.exit_code
    except KeyboardInterrupt:
        log.error("interrupted; vendor/ and patches/ are only ever changed in one journaled swap")
        return EXIT_INTERRUPTED
    except OSError as exc:
        # The last net under every command: the disk said no (full, read-only, gone). One line, never a traceback.
        where = f" ({exc.filename})" if exc.filename else ""
        log.error(f"error: {exc.strerror or exc}{where}")
        log.error("hint: a swap cut short is finished by the next command; see docs/guarantees.md")
        return EXIT_FAILED
