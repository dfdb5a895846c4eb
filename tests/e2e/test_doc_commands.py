"""The docs as a script: every fenced command of README.md and docs/*.md names something that exists,
with options it takes, and runs after the README's set-up.

Which blocks are commands, and how a line becomes commands, is tests/helpers/doc_commands.py's rule
(its docstring). For each command:
- `nox -s NAME [-- ARGS]` (also `python3 -m nox`): NAME is a session of `nox -l --json`; where the
  session runs `python -m release CMD` (noxfile.py), `CMD ARGS` parses with release.cli's parser;
  where it runs pytest, every path in ARGS exists;
- `python -m release CMD ...` (and `python -m release.gsm8k`): parses with release.cli's parser;
- `vllm-fused-moe ...` / `python -m vllm_fused_moe ...`: parses with the overlay's own CLI;
- pip, uv, git, gh, `$EDITOR`, ... (`PROGRAMS`): allowed, named only, never run;
- anything else fails: a new program in the docs is added to the list on purpose.
Placeholders are filled from `placeholders()`, and `[optional]` parts are checked with and without.

Then, in a copy of the checkout, a fresh venv gets exactly the README's set-up (the pip commands of
its rebase command, run as written) plus the documented install of the tooling (the fenced command
with `--group tooling`), and there, through the real entry points, run: `python -m release CMD
--help` of every documented command, the documented commands that are safe offline (SAFE), and
`nox -l --json`.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from helpers import REPO, tag_facts
from helpers.doc_commands import (
    DocCommand,
    doc_commands,
    docs,
    fenced_blocks,
    inline_spans,
    nox_call,
    program,
    split_commands,
    variants,
)
from release.cli import COMMANDS as REGISTRY
from release.cli import build_parser

COMMANDS = [command for doc in docs(REPO) for command in doc_commands(REPO, doc)]
# Documented commands that are safe to run offline in a copy of the checkout: (program, leading words).
SAFE = {
    ("release", ("status",)),
    ("release", ("check",)),
    ("release", ("train", "list")),
    ("nox", ("-s", "check")),
    ("nox", ("-s", "train", "--", "list")),
}
# Words of the prose that stand for a command: `python -m release COMMAND --help`, `python -m release …`.
IGNORED = {"COMMAND", "…", "..."}
PYTEST_SESSIONS = {"test", "contract", "kernel"}  # their ARGS go to pytest (kernel takes --flashinfer V first)


def placeholders(contract_version: str = "") -> dict[str, str]:
    """What a placeholder of the docs stands for when a command is checked."""
    table = {
        "TAG": tag_facts.head().tag,
        "PATH": sys.executable,
        "FILE": "scan.json",
        "URL": "http://127.0.0.1:8000/simple",
        "INDEX": "127.0.0.1:8000",
        "INDEX_DIR": "index",
        "DIST": "dist",
        "DIR": "out",
        "N": "2",
        "SECONDS": "120",
        "M": "model",
        "VERSION": "0.6.6",
        "SOURCE": "pypi",
        "PATCH": "0001",
        "COMMAND": "check",
        "ARGS": "vllm serve model",
        "VLLM_SERVE_ARGS": "vllm serve model",
    }
    if contract_version:
        table["X"] = contract_version
    return table


def release_parse_error(argv: list[str]) -> str | None:
    """What release.cli's parser says about `argv` (None: it parses; `--help` parses)."""
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            build_parser(argv).parse_args(argv)
        except SystemExit as exc:
            return None if exc.code == 0 else err.getvalue().strip().splitlines()[-1]
    return None


class _Parsed(Exception):
    """Raised in place of the overlay's report: the command line parsed."""


def overlay_parse_error(argv: list[str]) -> str | None:
    """What the overlay's CLI (vllm-fused-moe, python -m vllm_fused_moe) says about `argv`, in-process.

    Its parsers are built inside main(); the report that follows a parse is replaced by _Parsed.
    """
    import vllm_fused_moe.__main__ as overlay_cli
    from vllm_fused_moe import doctor

    def parsed(*_: object, **__: object) -> None:
        raise _Parsed

    err = io.StringIO()
    with (
        mock.patch.object(overlay_cli, "report", parsed),
        mock.patch.object(doctor, "report", parsed),
        redirect_stderr(err),
        redirect_stdout(io.StringIO()),
    ):
        try:
            overlay_cli.main(argv)
        except _Parsed:
            return None
        except SystemExit as exc:
            return None if exc.code == 0 else err.getvalue().strip().splitlines()[-1]
    return "the command line parsed but no report was asked for"


def session_commands(noxfile: Path) -> dict[str, str]:
    """Session name -> the `python -m release` command it runs (`release(session, "CMD")` in noxfile.py)."""
    found: dict[str, str] = {}
    for node in ast.parse(noxfile.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        name = node.name
        for decorator in node.decorator_list:
            for keyword in decorator.keywords if isinstance(decorator, ast.Call) else []:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    name = str(keyword.value.value)
        for call in ast.walk(node):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id == "release"
                and len(call.args) >= 2
                and isinstance(call.args[1], ast.Constant)
            ):
                found[name] = str(call.args[1].value)
    return found


def pytest_args_problem(args: list[str], root: Path) -> str | None:
    """A path in pytest's arguments that does not exist (the values of -k, -m and friends are not paths)."""
    takes_value = {"-k", "-m", "-p", "-o", "--durations", "--timeout", "--flashinfer"}
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if word in takes_value:
            skip = True
            continue
        if word.startswith("-"):
            continue
        if not (root / word.split("::")[0]).exists():
            return f"{word} does not exist"
    return None


# ----------------------------------------------------------------------------- static checks


def test_the_docs_have_commands_to_check() -> None:
    """What the rest rests on: the reader finds the commands of the docs (a broken reader finds none)."""
    kinds = {program(command.words).kind for command in COMMANDS}
    assert {"nox", "release", "other"} <= kinds, kinds
    assert any(command.doc == "README.md" for command in COMMANDS)
    assert any(c.doc == "docs/maintainers.md" and program(c.words).kind == "release" for c in COMMANDS)


def test_the_reader_splits_and_joins_as_a_shell_does(tmp_path: Path) -> None:
    assert split_commands('a "b && c" && d x | e; f  # g') == [["a", "b && c"], ["d", "x"], ["e"], ["f"]]
    text = "x\n```sh\nnox -s a -- \\\n  --b c   # note\n# only a comment\n```\n```\nrelease/ tree\n```\n"
    (tmp_path / "doc.md").write_text(text)
    found = doc_commands(tmp_path, tmp_path / "doc.md")
    assert [(c.line, c.words) for c in found] == [(3, ("nox", "-s", "a", "--", "--b", "c"))]
    assert variants(("x", "[--json]", "[--scan", "FILE]", "TAG..."), {"TAG": "v1", "FILE": "f"}) == [
        ["x", "v1"],
        ["x", "--json", "--scan", "f", "v1"],
    ]
    assert variants(("x", "[--env", "NAME=VALUE]...", "[--", "ARGS...]"), {"ARGS": "a b"}) == [
        ["x"],
        ["x", "--env", "NAME=VALUE", "--", "a", "b"],
    ]


def test_every_documented_command_starts_with_a_program_we_know() -> None:
    unknown = [command.where for command in COMMANDS if program(command.words).kind == "unknown"]
    assert not unknown, "commands of programs this test does not know:\n" + "\n".join(unknown)


def test_every_python_m_release_command_parses() -> None:
    problems = []
    for command in COMMANDS:
        found = program(command.words)
        if found.kind != "release":
            continue
        for argv in variants(found.args, placeholders()):
            problem = release_parse_error(argv)
            if problem:
                problems.append(f"{command.where}\n    python -m release {' '.join(argv)}: {problem}")
    assert not problems, "\n".join(problems)


def test_every_overlay_command_parses() -> None:
    problems = []
    for command in COMMANDS:
        found = program(command.words)
        if found.kind != "overlay":
            continue
        for argv in variants(found.args, placeholders()):
            problem = overlay_parse_error(argv)
            if problem:
                problems.append(f"{command.where}\n    vllm-fused-moe {' '.join(argv)}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_tooling_install_is_documented_where_the_set_up_is() -> None:
    """`python -m release` needs more than the README's set-up (nox and uv): the README says how.

    The set-up fixture runs that command, so the runs below prove it is enough.
    """
    installs = [c for c in COMMANDS if c.doc == "README.md" and "--group" in c.words and "tooling" in c.words]
    assert installs, "README.md has no fenced command that installs the tooling (`pip install --group tooling`)"


# ----------------------------------------------------------------------- the README's set-up


def copy_checkout(target: Path) -> Path:
    ignore = shutil.ignore_patterns(
        *(".git", ".nox", ".work", "reports", "dist", "index"),
        *("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"),
    )
    shutil.copytree(REPO, target, ignore=ignore, symlinks=True)
    return target


@dataclass(frozen=True)
class SetUp:
    root: Path  # the copy of the checkout
    python: Path  # the venv's interpreter: `python`/`python3` of the docs
    env: dict[str, str]
    log: str

    def run(self, words: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
        if words and words[0] in ("python", "python3"):
            words = [str(self.python), *words[1:]]
        elif words and words[0] in ("nox", "vllm-fused-moe"):
            words = [str(self.python.parent / words[0]), *words[1:]]
        return subprocess.run(
            words, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )


def readme_set_up_commands() -> list[list[str]]:
    """The README's set-up: the commands of its first command line (the rebase) before nox runs."""
    readme = next(
        c
        for c in COMMANDS
        if c.doc == "README.md"
        and program(c.words).kind == "nox"
        and "rebase" in nox_call(list(program(c.words).args)).sessions
    )
    first = [c for c in COMMANDS if c.doc == "README.md" and c.line == readme.line]
    words = []
    for command in first:
        if program(command.words).kind == "nox":
            break
        words.append(list(command.words))
    return words


@pytest.fixture(scope="module")
def set_up(tmp_path_factory: pytest.TempPathFactory) -> SetUp:
    base = tmp_path_factory.mktemp("readme")
    root = copy_checkout(base / "checkout")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    outside = [p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(sys.prefix)]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH")}
    env |= {"PATH": os.pathsep.join([str(venv / "bin"), *outside]), "VIRTUAL_ENV": str(venv)}
    ready = SetUp(root, venv / "bin" / "python", env, "")
    steps = readme_set_up_commands()
    assert steps, "README.md's first command has no set-up before nox"
    installs = [list(c.words) for c in COMMANDS if c.doc == "README.md" and c.words[-2:] == ("--group", "tooling")]
    log = []
    for words in steps + installs[:1]:
        result = ready.run(words)
        log.append(f"$ {' '.join(words)}\nexit {result.returncode}\n{result.stderr[-2000:]}")
        assert result.returncode == 0, log[-1]
    return SetUp(root, ready.python, env, "\n".join(log))


@pytest.fixture(scope="module")
def sessions(set_up: SetUp) -> list[dict[str, Any]]:
    """`nox -l --json` of every session (the expression selects them all; plain --json lists the defaults)."""
    listed = set_up.run(["python3", "-m", "nox", "-l", "--json", "-k", "contract or not contract"], timeout=120)
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


def contract_version(sessions: list[dict[str, Any]]) -> str:
    return next(str(s["call_spec"]["vllm"]) for s in sessions if "vllm" in s.get("call_spec", {}))


@pytest.mark.slow
@pytest.mark.network
def test_nox_commands_name_sessions_that_exist_with_arguments_they_take(sessions: list[dict[str, Any]]) -> None:
    names = {s["session"] for s in sessions} | {s["name"] for s in sessions}
    runs = session_commands(REPO / "noxfile.py")
    table = placeholders(contract_version(sessions))
    problems = []
    for command in COMMANDS:
        found = program(command.words)
        if found.kind != "nox":
            continue
        for argv in variants(found.args, table):
            call = nox_call(argv)
            problem = call.problem or ("no -s SESSION" if not call.sessions and "-l" not in argv else "")
            problem = problem or next((f"no session {s!r} (nox -l)" for s in call.sessions if s not in names), "")
            for session in call.sessions:
                base = session.split("(")[0]
                if problem:
                    break
                if base in runs:
                    problem = release_parse_error([runs[base], *call.posargs]) or ""
                elif base in PYTEST_SESSIONS:
                    problem = pytest_args_problem(list(call.posargs), REPO) or ""
                elif call.posargs:
                    problem = f"session {session} takes no arguments"
            if problem:
                problems.append(f"{command.where}\n    nox {' '.join(argv)}: {problem}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.network
def test_commands_in_the_prose_name_sessions_and_commands_that_exist(sessions: list[dict[str, Any]]) -> None:
    """`nox -s NAME` and `python -m release CMD` in inline code: the name exists (the rest is grammar)."""
    names = {s["session"] for s in sessions} | {s["name"] for s in sessions}
    commands = {command.name for command in REGISTRY}
    table = placeholders(contract_version(sessions))
    problems = []
    for doc in docs(REPO):
        for line, code in inline_spans(doc.read_text(encoding="utf-8")):
            nox = re.match(r"""^(?:python3? -m )?nox -s "?([^\s"]+)"?""", code)
            if nox:
                name = re.sub(r"'X'", f"'{table['X']}'", nox.group(1))
                if name not in names:
                    problems.append(f"{doc.relative_to(REPO)}:{line}: `{code}`: no session {name!r}")
            release = re.match(r"^python3? -m release (\S+)", code)
            if release and not release.group(1).startswith("-") and release.group(1) not in commands | IGNORED:
                problems.append(f"{doc.relative_to(REPO)}:{line}: `{code}`: no command {release.group(1)!r}")
    assert not problems, "\n".join(problems)


def documented_release_commands() -> list[str]:
    names = []
    for command in COMMANDS:
        found = program(command.words)
        if found.kind == "release" and found.args and found.args[0] not in names:
            names.append(found.args[0])
    return names


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("name", documented_release_commands())
def test_the_help_of_every_documented_command_runs_after_the_readme_set_up(set_up: SetUp, name: str) -> None:
    result = set_up.run(["python", "-m", "release", name, "--help"], timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, (
        f"`python -m release {name} --help` after the README's set-up:\n{result.stderr[-3000:]}\n"
        f"--- the set-up:\n{set_up.log}"
    )
    assert "exit codes:" in result.stdout


def safe_commands() -> Iterator[DocCommand]:
    for command in COMMANDS:
        found = program(command.words)
        argv = variants(found.args, placeholders())[0]
        if any(found.kind == kind and tuple(argv[: len(lead)]) == lead for kind, lead in SAFE):
            yield command


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("command", list(safe_commands()), ids=lambda c: f"{c.doc}:{c.line}")
def test_the_documented_commands_that_are_safe_offline_run_as_written(set_up: SetUp, command: DocCommand) -> None:
    argv = variants(command.words, placeholders())[0]
    result = set_up.run(argv)
    assert result.returncode == 0 and "Traceback" not in result.stderr, (
        f"{command.where}\nexit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}\n"
        f"--- the set-up:\n{set_up.log}"
    )


# --------------------------------------------------------------------------------- nox -l


@pytest.mark.slow
@pytest.mark.network
def test_each_session_description_is_true_of_that_session(sessions: list[dict[str, Any]]) -> None:
    """A parametrized session shares its docstring: it must not name one parameter's value for all."""
    problems = []
    for session in sessions:
        own = {str(value) for value in session.get("call_spec", {}).values()}
        if not own:
            continue
        named = set(re.findall(r"\d+\.\d+\.\d+(?:\.post\d+)?", session["description"]))
        if named - own:
            problems.append(f"{session['session']}: {session['description']!r} names {sorted(named - own)}")
    assert not problems, "\n".join(problems)
    assert any(session.get("call_spec") for session in sessions), "no parametrized session left to check"


def test_the_fenced_block_reader_sees_every_fence_of_the_docs() -> None:
    """Every ``` line of the docs opens or closes a block the reader found (no block is silently skipped)."""
    for doc in docs(REPO):
        text = doc.read_text(encoding="utf-8")
        fences = sum(1 for line in text.splitlines() if line.strip().startswith(("```", "~~~")))
        assert fences == 2 * len(list(fenced_blocks(text))), doc
