"""Which vLLM code a contract run exercised, and whether another release has the same code.

`nox -s test` runs the contract once per group of train tags (tests/contract/groups.toml):
a tag is only covered by another tag's run if every vLLM function that run called has
byte-identical source in both releases, the FlashInfer prepare/finalize files are
byte-identical, and both pin the same FlashInfer. This module computes the differences.

Function source is compared by qualified name: when a file differs, each recorded
function's source segment (its `def` with decorators and body, as `ast` locates it) must
be equal. A lambda or comprehension is compared through its enclosing function.
"""

from __future__ import annotations

import ast
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .paths import CONTRACT_GROUPS, release_line

Function = tuple[str, str]  # (file under vllm/, qualified name)
DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True)
class TagGroup:
    tags: tuple[str, ...]  # oldest first; the last one is the group's representative

    @property
    def representative(self) -> str:
        return self.tags[-1]


def load_groups(path: Path = CONTRACT_GROUPS) -> tuple[TagGroup, ...]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return tuple(TagGroup(tuple(group["tags"])) for group in data["group"])


def load_not_yet_driven(path: Path = CONTRACT_GROUPS) -> dict[str, str]:
    """Train tags the harness cannot drive yet (groups.toml `[[not_yet]]`): tag -> why."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {tag: entry["why"] for entry in data.get("not_yet", []) for tag in entry["tags"]}


def group_of(tag: str, groups: tuple[TagGroup, ...]) -> TagGroup | None:
    return next((group for group in groups if tag in group.tags), None)


def _find(body: list[ast.stmt], name: str) -> DefNode | None:
    found = None
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            found = node  # the last definition wins, as at run time
    return found


def function_source(source: str, qualname: str) -> str:
    """The source of `qualname` in `source`; the innermost enclosing def for lambdas and the like."""
    tree = ast.parse(source)
    body: list[ast.stmt] = tree.body
    node: DefNode | None = None
    for part in qualname.split("."):
        if part == "<locals>":
            continue
        child = _find(body, part)
        if child is None:
            break
        node, body = child, child.body
    if node is None:
        return source  # module-level code: the whole file is the unit
    segment = ast.get_source_segment(source, node, padded=True) or ""
    decorators = "".join(f"@{ast.get_source_segment(source, d)}\n" for d in node.decorator_list)
    return decorators + segment


def module_lambdas(source: str) -> dict[int, list[str]]:
    """Module-level lambdas (not inside a def or class) by first line: their source texts."""
    found: dict[int, list[str]] = {}
    tree = ast.parse(source)
    nested = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
        for child in ast.iter_child_nodes(node)
        for inner in ast.walk(child)
        if isinstance(inner, ast.Lambda)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda) and id(node) not in nested:
            found.setdefault(node.lineno, []).append(ast.get_source_segment(source, node) or "")
    return found


def _same_lambda(ours: str, theirs: str, line: int) -> bool:
    """The lambda that ran at `line` of our file is, text for text, a module-level lambda of theirs.

    Lines move between releases; the text does not when the lambda is unchanged (envs.py's
    lambdas each name their variable, so equal text is the same variable's lambda).
    """
    texts = module_lambdas(ours).get(line)
    if not texts:
        return False
    their_texts = {text for segments in module_lambdas(theirs).values() for text in segments}
    return all(text in their_texts for text in texts)


def differing_functions(ours: dict[str, bytes], theirs: dict[str, bytes], functions: list[Function]) -> list[str]:
    """The recorded functions whose source differs between two releases' files.

    `ours` are the files of the release the run used (a module-level lambda's recorded
    line, `<lambda>@LINE`, refers to them).
    """
    differing = []
    for file, qualname in functions:
        a, b = ours.get(file), theirs.get(file)
        if a == b:
            continue
        if a is None or b is None:
            differing.append(f"{file}: only in one release")
            continue
        if qualname.startswith("<lambda>@"):
            if not _same_lambda(a.decode(), b.decode(), int(qualname.removeprefix("<lambda>@"))):
                differing.append(f"{file}: {qualname}")
            continue
        if function_source(a.decode(), qualname) != function_source(b.decode(), qualname):
            differing.append(f"{file}: {qualname}")
    return differing


def flashinfer_module_files() -> list[str]:
    line = release_line()
    return [line.upstream_file(module).as_posix() for module in line.modules]


def installed_files(vllm_package: Path, names: set[str]) -> dict[str, bytes]:
    root = vllm_package.parent
    return {name: (root / name).read_bytes() for name in names if (root / name).is_file()}


def wheel_files(wheel: Path, names: set[str]) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        present = set(archive.namelist())
        return {name: archive.read(name) for name in names if name in present}


def wheel_metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        return archive.read(name).decode("utf-8", "replace")
