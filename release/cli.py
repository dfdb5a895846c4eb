"""The command line: `python -m release COMMAND` (installed: `vllm-fused-moe-release COMMAND`).

One table (`COMMANDS`) names every command, the module that configures and runs it, the exit
codes it can return and its examples; `--help` of each command lists exactly those, and
docs/architecture.md holds the table of all the codes (`exit_code_table()`, checked by a test).
Each command is one module of its stage with `configure(parser)` and `run(args, layout)`: the
stage's `cli.py` for the command named after the stage, `<command>_cli.py` for another command of
it (docs/architecture.md, "How a command is wired"). The table imports each of them in a function
of its own, so that import-linter and a reader see which module a command reaches, and a command
imports only its own module (`check --help` does not pay for the wheel reader's requests).
Errors are caught here once, printed as one `error:` line plus a `hint:` line, and turned
into their exit code (release.core.errors).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from release.core import flags, log
from release.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TRANSPORT,
    BadInputError,
    DiskError,
    ModuleMissingError,
    ReleaseError,
    UndeclaredExitError,
)
from release.core.layout import Layout
from release.core.text import escaped

PROG = "python -m release"

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


class CommandModule(Protocol):
    """What the module of one command holds (mypy checks every loader of COMMANDS against it)."""

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, layout: Layout) -> int: ...


# One loader per command module: the import sits in the function, so that a command imports its own
# module alone, and is a plain import statement, so that import-linter sees the edge.
def _rebase() -> CommandModule:
    from release.rebase import cli

    return cli


def _tags() -> CommandModule:
    from release.rebase import tags_cli

    return tags_cli


def _check() -> CommandModule:
    from release.queue import check_cli

    return check_cli


def _status() -> CommandModule:
    from release.queue import status_cli

    return status_cli


def _pq() -> CommandModule:
    from release.pq import cli

    return cli


def _train() -> CommandModule:
    from release.train import cli

    return cli


def _scan() -> CommandModule:
    from release.scan import cli

    return cli


def _build() -> CommandModule:
    from release.overlay import build_cli

    return build_cli


def _publish() -> CommandModule:
    from release.overlay import publish_cli

    return publish_cli


def _signing_key() -> CommandModule:
    from release.overlay import signing_key_cli

    return signing_key_cli


def _evidence() -> CommandModule:
    from release.evidence import cli

    return cli


def _doctor() -> CommandModule:
    from release.overlay import doctor_cli

    return doctor_cli


def _upstream_pr() -> CommandModule:
    from release.upstream_pr import cli

    return cli


def _gsm8k() -> CommandModule:
    from release.gsm8k import cli

    return cli


@dataclass(frozen=True)
class Command:
    name: str
    load: Callable[[], CommandModule]
    help: str
    exit_codes: tuple[int, ...]
    # What a code means for this command, where that says more than EXIT_MEANINGS.
    exit_texts: tuple[tuple[int, str], ...] = ()
    # (the arguments after the program's name, what they do): the "examples:" of its --help.
    examples: tuple[tuple[str, str], ...] = ()

    def meaning(self, code: int) -> str:
        return dict(self.exit_texts).get(code, EXIT_MEANINGS[code])


_COMMON = (EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED)
# Every command that reads the network (release/pristine/transport.py, git remotes, the gsm8k server)
# says a broken transport with the same code (upstream-pr: the release wheels its regression test runs
# against; build --all and publish: a train tag's release wheel not in the cache); doctor, check and status
# read only local files and processes. A kind whose code a command does not declare never leaves it with that
# code (`edge`): tests/unit/test_exit_codes.py drives every kind through every command.
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
# The doctor's code is its verdict's (docs/doctor.md, "Verdicts and exit codes"): one table in its --help.
_DOCTOR_EXITS = (
    (EXIT_OK, "not affected, or fixed and live, or the command line after -- does not run the affected code"),
    (EXIT_FAILED, "affected and not fixed, fixed but not live, or live but damaged: the report's fix: line says "
     "what to run"),
    (EXIT_BAD_INPUT, "cannot tell (the report says why), vLLM would refuse the command line, the interpreter "
     "gave no report (within --timeout), or bad input (--python, --env, --timeout, --index-url)"),
)  # fmt: skip
COMMANDS: tuple[Command, ...] = (
    Command("rebase", _rebase, "move vendor/ and patches/ onto another vLLM tag",
            (*_COMMON, EXIT_CONFLICT, EXIT_TRANSPORT),
            examples=(("rebase v0.21.0 --from pypi", "replay the series on v0.21.0's release wheel, swap it in"),
                      ("rebase v0.21.0 --from pypi --dry-run", "classify each patch and report; change nothing"),
                      ("rebase --continue .work/rebase-v0.21.0", "finish a rebase that stopped at a conflict"))),
    Command("check", _check, "verify vendor/ == pristine(UPSTREAM.toml) + series", _COMMON,
            examples=(("check", "is vendor/ exactly the pinned release plus the series?"),
                      ("-q check", "the same, with nothing on stderr unless it fails"))),
    Command("status", _status, "the pinned tag, the patches and their states", _COMMON,
            examples=(("status", "the pinned tag, its FlashInfer pin and each patch with its trailers"),)),
    Command("pq", _pq, "edit the patch queue as git commits, carry a patch to the lines",
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
                         "while reading a train tag")),
            examples=(("pq import", "the queue as commits in .work/pq/: pristine, then one commit per patch"),
                      ("pq import --line flashinfer_a2a", "that line's newest tag, to make its variant by hand"),
                      ("pq export", "the commits back into patches/ and vendor/, in one swap"))),
    Command("train", _train, "the release train: add, remove, list, check the tags we ship", _NETWORK,
            examples=(("train list", "every tag we ship an overlay for"),
                      ("train add v0.21.0", "add a release to the train, with its pristine and patched hashes"),
                      ("train check", "rebuild every train tag and compare the recorded hashes"))),
    Command("tags", _tags, "list vLLM release tags newer than the pin", _NETWORK,
            examples=(("tags", "vLLM final releases newer than the pin, oldest first"),
                      ("tags --newest", "only the newest one (what the watch workflow rebases onto)"))),
    Command("scan", _scan, "classify every vLLM release on the index for each patch", _NETWORK,
            examples=(("scan --since v0.21.0", "classify the newer releases and update the affected-releases files"),
                      ("scan --dry-run --markdown", "print the whole table; write nothing"),
                      ("scan --dry-run --json", "print the JSON document (what `train watch` reads)"))),
    Command("build", _build, "build the overlay wheel into dist/", _NETWORK,
            exit_texts=((EXIT_TRANSPORT, "`--all`: a train tag's release wheel is not in the cache and the package "
                         "index broke while it was read; nothing was written"),),
            examples=(("build", "the head's overlay wheel into dist/"),
                      ("build --all", "one wheel per train tag"))),
    Command("publish", _publish, "add wheels to a PEP 503 index directory, or upload them to an index server",
            _NETWORK,
            exit_texts=((EXIT_FAILED, "vendor/ drifted from pristine + series (`check`), without --allow-dirty"),
                        (EXIT_TRANSPORT, "a wheel's evidence needs its release wheel, not in the cache, and the "
                         "package index broke while it was read; --to: the server's page could not be read, the "
                         "upload was refused (credentials, HTTP), or the server lists other bytes than those "
                         "uploaded; the index was not changed"),
                        (EXIT_BAD_INPUT, "bad input: a wheel that is no regular file of at most 1 GiB (a FIFO, a "
                         "device, a directory), not ours, dirty or missing a fix; a queue `check` refuses; a wheel "
                         "that is not the checkout's own build of its tag, or whose evidence does not prove every "
                         "recorded bug; a clash (in the index, or on the server: other bytes under that name) or an "
                         "index no publish leaves; an unusable --signing-key; the index was not changed, nothing "
                         "was uploaded"),),
            examples=(("publish dist index", "add dist/'s wheels to index/simple/ and write index/requirements/"),
                      ("publish dist/ONE.whl index", "add one wheel"),
                      ("publish dist site --to URL --signing-key key.pem",
                       "upload to the server at URL; requirements/ and signed evidence/ into site/"))),
    Command("signing-key", _signing_key, "print the fingerprint of the key that signs the evidence", _COMMON,
            examples=(("signing-key --key key.pem", "its public key and fingerprint, what operators pin"),
                      ("signing-key --generate key.pem", "make a new ed25519 key, then print the same"))),
    Command("evidence", _evidence, "prove a release line's skip of a bug's patch (under torch)", _NETWORK,
            exit_texts=((EXIT_BAD_INPUT, "a skip is not proven (nothing was changed): the bug's test fails on a "
                         "release of the line (it has the bug: carry the fix) or errors (no evidence)"),),
            examples=(("evidence --line flashinfer_a2a --python PY", "prove that line's skips on each of its tags"),
                      ("evidence --tag v0.19.0 --on LINE --python PY", "the same for a tag before `train add`"))),
    Command("upstream-pr", _upstream_pr, "turn a patch into an upstream vLLM pull request", _NETWORK,
            exit_texts=((EXIT_FAILED, "the regression test did not fail without the patch or did not pass with it "
                         "(every run is named); nothing was written"),),
            examples=(("upstream-pr 0001", "the mail and PR.md for patch 0001, its regression test proven first"),
                      ("upstream-pr 0001 --skip-test-run", "the same without running the test (PR.md says so)"),
                      ("upstream-pr 0001 --vllm ../vllm", "the same as the first, and a branch in a vLLM clone"))),
    Command("doctor", _doctor, "is an environment affected by the double reduce, is the fix live",
            _COMMON, exit_texts=_DOCTOR_EXITS,
            examples=(("doctor --python PY", "what PY's environment has: vLLM, FlashInfer, the overlay"),
                      ("doctor --python PY --json", "the same report as JSON (docs/doctor.schema.json)"),
                      ("doctor --python PY -- vllm serve M --enable-expert-parallel",
                       "would that serve command be affected in PY's environment?"))),
    Command("gsm8k", _gsm8k, "GSM8K 5-shot smoke against a real `vllm serve`",
            _NETWORK, exit_texts=_GSM8K_EXITS,
            examples=(("gsm8k --model M --backend flashinfer_all2allv --limit 200",
                       "a short gated run of M with the fix"),
                      ("gsm8k --model M --backend flashinfer_all2allv --compare",
                       "the same, and a run without the fix beside it (evidence, not gated)"))),
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


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs wrapped at the terminal's width (80 where there is none), as argparse
    wraps the options: a paragraph of plain lines is filled; one with indented lines (a list, a table,
    a command) keeps its lines and breaks only those too long, under the text of their first column."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        # Examples stay as written: a command line is copied, and a break in it would spoil the copy.
        return "\n\n".join(
            part if part.startswith("examples:\n") else fill_paragraph(part, width, indent)
            for part in text.split("\n\n")
        )


def fill(text: str, width: int, indent: str, hang: str) -> str:
    # Paths, options and file names stay whole (`affected-releases.json`, `--allow-dirty`).
    return textwrap.fill(
        text, width, initial_indent=indent, subsequent_indent=hang, break_on_hyphens=False, break_long_words=False
    )


def fill_paragraph(text: str, width: int, indent: str = "") -> str:
    lines = text.splitlines()
    if not any(line[:1].isspace() for line in lines):
        return fill(" ".join(lines), width, indent, indent)
    # A list or a table: each entry is a line, and the lines under its text (a first column's, as in
    # "  git:PATH   a local clone") that carry it on; an entry is refilled only where it is too long.
    entries: list[tuple[str, int]] = []  # (the entry's text, where its continuation lines start)
    for line in lines:
        lead = len(line) - len(line.lstrip())
        if entries and lead == entries[-1][1] and lead > len(entries[-1][0]) - len(entries[-1][0].lstrip()):
            entries[-1] = (f"{entries[-1][0]} {line.strip()}", entries[-1][1])
            continue
        column = re.match(r"\s*(?:\S+(?: \S+)*\s{2,}(?=\S))?", line)
        entries.append((line, min(len(column.group(0)) if column else lead, width // 2)))
    out = []
    for entry, hang in entries:
        if len(indent + entry) <= width:
            out.append(indent + entry)
        else:
            out.append(fill(entry, width, indent, indent + " " * hang))
    return "\n".join(out)


def examples_text(prog: str, examples: Sequence[tuple[str, str]]) -> str:
    return "examples:\n" + "\n".join(f"  {prog} {line}\n      {what}" for line, what in examples)


def build_parser(argv: Sequence[str] | None = None, prog: str = PROG) -> argparse.ArgumentParser:
    """The whole command line; with `argv`, only the commands it names are configured.

    Configuring a command imports its module, and some pull in heavy libraries (the wheel reader
    imports requests): `python -m release check` should not pay for them. The list of commands
    and their help come from the table either way.
    """
    every = {code: EXIT_MEANINGS[code] for command in COMMANDS for code in command.exit_codes}
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Maintain the vendored vLLM fused-MoE code, its patch series and the overlay wheels.",
        epilog=exit_codes_text(every) + f"\n\nwhat each code means for one command: {prog} COMMAND --help",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "-C",
        dest="directory",
        type=flags.path,
        default=None,
        metavar="DIR",
        help="run as if started in DIR: relative path arguments (DIST, INDEX_DIR, --out, --python) are read from "
        "there (the nox sessions pass the directory nox was started in, as nox itself runs in the checkout)",
    )
    parser.add_argument(
        "--root",
        type=flags.path,
        default=None,
        help="the checkout to work on (default: the one this program lies in, or else the one that holds the working "
        "directory)",
    )
    said = parser.add_mutually_exclusive_group()
    said.add_argument(
        "-q",
        "--quiet",
        action="store_const",
        const=log.QUIET,
        dest="verbosity",
        help="say nothing on stderr but warnings and the error and hint lines of a failure (no notes, no "
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
        sub = commands.add_parser(command.name, help=command.help, formatter_class=HelpFormatter)
        if argv is None or command.name in argv:
            module = command.load()
            module.configure(sub)
            sub.set_defaults(func=module.run)
        # A command may write its own epilog (sources, notes); its examples and exit codes always end it.
        own = exit_codes_text({code: command.meaning(code) for code in command.exit_codes})
        if command.examples:
            own = examples_text(prog, command.examples) + "\n\n" + own
        sub.epilog = (sub.epilog.rstrip("\n") + "\n\n" if sub.epilog else "") + own
        for action in sub._actions:  # an action's own --help (`pq export --help`) ends with them too
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    child.formatter_class = HelpFormatter
                    child.epilog = (child.epilog.rstrip("\n") + "\n\n" if child.epilog else "") + own
    return parser


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parsed: list[argparse.Namespace] = []

    def run() -> int:
        refuse_undecodable(argv)
        args = build_parser(argv, prog).parse_args(argv)
        parsed.append(args)
        log.configure(args.verbosity)
        if args.directory is not None:
            # Before the layout and any path argument is read: `--root` and relative paths mean the caller's.
            os.chdir(args.directory)
        layout = Layout(args.root.resolve()) if args.root else Layout.default()
        return int(args.func(args, layout))

    return edge(lambda: parsed[0].command if parsed else None, run)


def edge(command: Callable[[], str | None], run: Callable[[], int]) -> int:
    """`run()`, every failure caught once: one `error[...]` line, its hint, and its exit code, which must be one
    the command (`command()`'s name, once known) declares; one it does not is reported as UndeclaredExitError."""
    try:
        return run()
    except ModuleNotFoundError as exc:
        if (exc.name or "release").partition(".")[0] == "release":
            raise  # a module of ours missing is a broken checkout, not a missing dependency
        return report(declared(command(), ModuleMissingError.of(exc.name or str(exc))))
    except ReleaseError as exc:
        return report(declared(command(), exc))
    except KeyboardInterrupt:
        log.error("interrupted; vendor/ and patches/ are only ever changed in one journaled swap")
        return EXIT_INTERRUPTED
    except OSError as exc:
        # The last net under every command: the disk said no (full, read-only, gone). One line, never a traceback.
        return report(declared(command(), DiskError.of(exc)))


def declared(name: str | None, exc: ReleaseError) -> ReleaseError:
    """`exc` where command `name` declares its exit code (or no command was parsed yet); else the tool's own
    failure, UndeclaredExitError (exit 1, which every command declares), naming the kind and its message."""
    command = next((c for c in COMMANDS if c.name == name), None)
    if command is None or exc.exit_code in command.exit_codes:
        return exc
    return UndeclaredExitError(
        f"{command.name} raised {exc.reference} (exit {exc.exit_code}), an exit code `{command.name} --help` "
        f"does not declare: {exc}"
    )


def refuse_undecodable(argv: list[str]) -> None:
    """Every argument is text: bytes that are not UTF-8 (`--reason $'\\xff'`) reach Python as lone
    surrogates, which no file, mail or message can hold (UnicodeEncodeError at the first write).
    Refused before anything is read, with the argument's position, never echoed as it is."""
    for number, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            raise BadInputError(
                f"argument {number} ('{shown}') is not UTF-8 text",
                hint="type it in UTF-8 (the tool writes every word it is given into UTF-8 files and mails)",
            ) from None


def report(exc: ReleaseError) -> int:
    """One error line that names the kind by its reference (docs/architecture.md, "Error references"), then its hint."""
    # A message may quote what came from outside (a commit subject, a file name, an index): its control
    # characters are escaped here, once for every command; a log tail's own line breaks and tabs stay.
    log.error(escaped(f"error[{exc.reference}]: {exc}", keep="\n\t"))
    if exc.hint:
        log.error(escaped(f"hint: {exc.hint}", keep="\n\t"))
    return exc.exit_code
