"""The commands of README.md and docs/*.md, read the way a person copies them into a shell.

Which fenced blocks are commands (the rule tests/e2e/test_doc_commands.py holds the docs to):
- a block tagged `sh`, `bash`, `shell` or `console` is commands; a block with another tag (`toml`,
  `python`, ...) never is;
- an untagged block is commands when its first line that is not blank or a `#` comment starts with a
  program this module knows (`PROGRAMS`, `python -m` of a known module, or a `$ ` prompt); anything
  else (a directory tree, a report, a table of timings) is output and is skipped;
- in a block with `$ ` prompts only the prompted lines are commands, the rest is their output.
Inside a command block a backslash at the end of a line continues it, `#` starts a comment, and
`&&`, `||`, `;` and `|` separate commands. Placeholders (TAG, PATH, X, ...) are replaced from a table
the test passes in; `[...]` is optional (both with and without it are checked) and `...` after a
word means "more of the same".
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

FENCE_RE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")
COMMAND_TAGS = {"sh", "bash", "shell", "console"}
# Programs a documented command may start with besides ours (nox, python -m release, the overlay's
# CLI): checked to be one of these, not run. A new program in the docs is added here on purpose.
PROGRAMS = {
    "pip", "uv", "git", "gh", "$EDITOR", "${EDITOR:-vi}", "sed", "curl", "torchrun", "bash", "sh", ".", "source",
    "vllm",
    "dos2unix", "cd", "export", "ls", "cat", "time", "mkdir", "cp", "echo", "env", "sha256sum", "tar", "unzip",
    "wget", "pipx", "docker",
}  # fmt: skip
PYTHON_MODULES = {"pip", "venv", "pytest", "http.server", "build"}  # `python -m X`, not ours: not run
PYTHONS = {"python", "python3"}
SEPARATORS = {"&&", "||", ";", "|"}


@dataclass(frozen=True)
class DocCommand:
    doc: str  # relative to the checkout, e.g. "docs/maintainers.md"
    line: int  # where the command starts
    text: str  # as written, continuations joined
    words: tuple[str, ...]  # shell words, comments dropped

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


@dataclass(frozen=True)
class Program:
    """What a command runs: `nox`, `release` (python -m release), `overlay` (vllm-fused-moe), `other`
    (a known program we only name), or `unknown`; `args` are the words after the program."""

    kind: str
    args: tuple[str, ...]


def fenced_blocks(text: str) -> Iterator[tuple[str, int, list[tuple[int, str]]]]:
    """(info string, line of the fence, [(line number, line)]) of every fenced block."""
    lines = text.splitlines()
    at = 0
    while at < len(lines):
        opened = FENCE_RE.match(lines[at])
        if not opened:
            at += 1
            continue
        indent, fence = len(opened.group("indent")), opened.group("fence")
        body: list[tuple[int, str]] = []
        end = at + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append((end + 1, lines[end][indent:] if lines[end][:indent].isspace() else lines[end].lstrip()))
            end += 1
        yield opened.group("info").strip(), at + 1, body
        at = end + 1


def split_commands(line: str) -> list[list[str]]:
    """Shell words of one logical line, cut at `&&`, `||`, `;` and `|` outside quotes; comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="&|;")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    for word in lexer:
        if word in SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [words for words in commands if words]


def program(words: list[str] | tuple[str, ...]) -> Program:
    rest = list(words)
    while rest and re.match(r"^[A-Z_][A-Z0-9_]*=", rest[0]):  # VAR=value before the program
        rest.pop(0)
    if not rest:
        return Program("unknown", ())
    first, args = rest[0], tuple(rest[1:])
    if first in PYTHONS or first.rsplit("/", 1)[-1] in PYTHONS:  # also a venv's own: .venv/bin/python
        if len(args) >= 2 and args[0] == "-m":
            module, after = args[1], args[2:]
            if module == "nox":
                return Program("nox", after)
            if module == "release":
                return Program("release", after)
            if module == "release.gsm8k":  # the same command without the registry in front
                return Program("release", ("gsm8k", *after))
            if module == "vllm_fused_moe":
                return Program("overlay", after)
            if module in PYTHON_MODULES:
                return Program("other", args)
        return Program("unknown", args)
    if first == "nox":
        return Program("nox", args)
    if first == "vllm-fused-moe":
        return Program("overlay", args)
    if first in PROGRAMS:
        return Program("other", args)
    return Program("unknown", args)


def _logical_lines(body: list[tuple[int, str]], console: bool) -> Iterator[tuple[int, str]]:
    pending: list[str] = []
    start = 0
    for number, raw in body:
        line = raw.rstrip()
        if not pending:
            if console:
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield start, " ".join(part.strip() for part in pending)
        pending = []
    if pending:
        yield start, " ".join(part.strip() for part in pending)


def is_command_block(info: str, body: list[tuple[int, str]]) -> bool:
    tag = info.split()[0].lower() if info else ""
    if tag:
        return tag in COMMAND_TAGS
    for _, line in body:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith("$ "):
            return True
        try:
            words = split_commands(text)
        except ValueError:
            return False
        return bool(words) and program(words[0]).kind != "unknown"
    return False


def doc_commands(root: Path, doc: Path) -> list[DocCommand]:
    """Every command of the fenced command blocks of `doc`."""
    name = doc.relative_to(root).as_posix()
    found: list[DocCommand] = []
    for info, _, body in fenced_blocks(doc.read_text(encoding="utf-8")):
        if not is_command_block(info, body):
            continue
        console = info.lower().startswith("console") or any(line.startswith("$ ") for _, line in body)
        for number, line in _logical_lines(body, console):
            for words in split_commands(line):
                found.append(DocCommand(name, number, line, tuple(words)))
    return found


def docs(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def inline_spans(text: str) -> Iterator[tuple[int, str]]:
    """(line, code) of every inline code span outside fenced blocks."""
    fenced = {number for _, fence, body in fenced_blocks(text) for number in [fence, *(n for n, _ in body)]}
    for number, line in enumerate(text.splitlines(), 1):
        if number in fenced:
            continue
        for match in re.finditer(r"(?<!`)`([^`\n]+)`(?!`)", line):
            yield number, match.group(1)


def variants(words: tuple[str, ...], placeholders: Mapping[str, str]) -> list[list[str]]:
    """The command with every `[optional]` group left out, and with all of them in; placeholders filled."""
    without: list[str] = []
    with_all: list[str] = []
    depth = 0
    for word in words:
        # `[--env NAME=VALUE]...`: a repeatable group closes before its `...`
        more = word.endswith(("]...", "]…"))
        word = word.removesuffix("...").removesuffix("…") if more else word
        opens, closes = word.startswith("["), word.endswith("]") and not word.endswith("[]")
        inner = word[1 if opens else 0 : len(word) - (1 if closes else 0)]
        if opens:
            depth += 1
        if depth == 0:
            without.append(word)
        with_all.append(inner)
        if closes and depth:
            depth -= 1
    return [fill(without, placeholders), fill(with_all, placeholders)]


def fill(words: list[str], placeholders: Mapping[str, str]) -> list[str]:
    filled: list[str] = []
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, placeholders)) + r")(?![\w-])")
    for word in words:
        if word in ("...", "…"):
            continue
        word = word.removesuffix("...").removesuffix("…")
        if word in placeholders:
            filled += shlex.split(placeholders[word])
        elif word.startswith("-"):
            filled.append(word)
        else:
            filled.append(pattern.sub(lambda m: placeholders[m.group(1)], word))
    return filled


@dataclass(frozen=True)
class NoxCall:
    sessions: tuple[str, ...]
    posargs: tuple[str, ...]
    problem: str = ""  # an option this reading does not know


# nox's options as the docs use them: those that take a value, and flags.
NOX_VALUE_OPTIONS = {"-db", "--default-venv-backend", "-fb", "--force-venv-backend", "-k", "--keywords", "-f",
                     "--noxfile", "--envdir", "-p", "--python", "-t", "--tags"}  # fmt: skip
NOX_FLAGS = {"-l", "--list", "--json", "-R", "-r", "--reuse-existing-virtualenvs", "-x", "--stop-on-first-error",
             "--no-venv", "--no-install", "--install-only", "-N", "--no-reuse-existing-virtualenvs",
             "--non-interactive",
             "-v", "--verbose", "--version", "-h", "--help"}  # fmt: skip
NOX_SESSION_OPTIONS = {"-s", "-e", "--session", "--sessions"}


def nox_call(args: list[str]) -> NoxCall:
    sessions: list[str] = []
    at, naming = 0, False
    while at < len(args):
        word = args[at]
        if word == "--":
            return NoxCall(tuple(sessions), tuple(args[at + 1 :]))
        if word in NOX_SESSION_OPTIONS:
            naming = True
        elif word in NOX_VALUE_OPTIONS:
            naming = False
            at += 1
        elif word in NOX_FLAGS:
            naming = False
        elif word.startswith("-"):
            return NoxCall(tuple(sessions), (), f"nox option {word!r} is not one this test knows")
        elif naming:
            sessions.append(word)
        else:
            return NoxCall(tuple(sessions), (), f"{word!r} is neither a nox option nor a session name after -s")
        at += 1
    return NoxCall(tuple(sessions), ())


# ------------------------------------------------------------------- installs of our wheel

# The blocks of docs/overlay.md that tests/overlay/test_user_install.py runs in a hostile shell.
USER_INSTALL_RE = re.compile(r"^<!-- user-install: ([\w-]+) -->\n```\w*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def user_install_blocks(text: str, marker: str = "user-install") -> dict[str, list[str]]:
    """kind (pip, uv) -> the non-blank lines of that `<!-- user-install: kind -->` block (or of another `marker`:
    `server-install`, the install from an index server, tests/e2e/test_index_server.py)."""
    found = re.compile(USER_INSTALL_RE.pattern.replace("user-install", re.escape(marker)), re.MULTILINE | re.DOTALL)
    return {kind: [line for line in body.splitlines() if line.strip()] for kind, body in found.findall(text)}


def installs_our_wheel(words: tuple[str, ...] | list[str]) -> bool:
    """A pip or uv install that names `vllm-fused-moe` or one of our index's requirements files."""
    if "install" not in words or not ({"pip", "-m"} & set(words) or words[0] == "uv"):
        return False
    return any(re.match(r"vllm-fused-moe\b", word) or "/requirements/vllm-" in word for word in words)


def install_shape(words: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The command with its interpreter, index address and versions made generic, so that an
    example's `https://INDEX/…/vllm-X.txt` and the tested `https://fused-moe.example.com/…/vllm-0.20.0.txt`
    compare equal, and `python -m pip`, `PYTHON -m pip` and `/venv/bin/python -m pip` are all `pip`."""
    rest = list(words)
    while rest and re.match(r"^[A-Z_][A-Z0-9_]*=", rest[0]):
        rest.pop(0)
    if len(rest) > 2 and rest[1:3] == ["-m", "pip"]:
        rest = ["pip", *rest[3:]]
    shape = []
    for word in rest:
        word = re.sub(r"(?:https?|file)://(?:<[^>]*>|[^/\s]+)", "URL", word)
        word = re.sub(r"\b(?:INDEX|URL)\b(?=/)", "URL", word)
        word = re.sub(r"\d+\.\d+\.\d+(?:\.post\d+)?|(?<=vllm-)(?:X|<[^>]*>)(?=\.txt)", "V", word)
        shape.append(word)
    return tuple(shape)


def commands_under(root: Path, doc: Path, heading: str) -> list[DocCommand]:
    """The commands of the first command block after the line `heading` of `doc` (a test that runs one
    documented procedure as written)."""
    text = doc.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert heading in lines, f"{doc.name} has no heading {heading!r}"
    after = lines.index(heading) + 1
    name = doc.relative_to(root).as_posix()
    for info, fence, body in fenced_blocks(text):
        if fence > after and is_command_block(info, body):
            console = info.lower().startswith("console")
            return [DocCommand(name, n, line, tuple(w)) for n, line in _logical_lines(body, console)
                    for w in split_commands(line)]  # fmt: skip
    raise AssertionError(f"{doc.name} has no command block under {heading!r}")
