"""patches/lines.toml: the release lines, each a set of module paths inside a vLLM wheel."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import ConfigError

HINT = "patches/lines.toml holds [[line]] tables with `name`, `modules` and `markers` (paths in the wheel)"


@dataclass(frozen=True)
class Line:
    name: str
    modules: tuple[str, ...]  # what is read: a prefix ending in "/" is a package directory, else one file
    markers: tuple[str, ...]  # a release is on the line when it has all of these (default: the modules)

    def wants(self, member: str) -> bool:
        """Is this wheel member one of the line's modules (bytecode left out)?"""
        if "__pycache__" in member or member.endswith((".pyc", "/")):
            return False
        return any(_matches(member, module) for module in self.modules)

    def present(self, names: list[str]) -> bool:
        """Is a release with these members on this line (has it every marker)?"""
        return all(any(_matches(name, marker) for name in names) for marker in self.markers)


def _matches(member: str, module: str) -> bool:
    return member.startswith(module) if module.endswith("/") else member == module


def load_lines(path: Path) -> list[Line]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} is missing", hint="restore patches/lines.toml from git") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", hint=HINT) from None
    items = data.get("line")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{path} defines no [[line]]", hint=HINT)
    lines = []
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        modules = item.get("modules") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}: line #{index + 1} has no name", hint=HINT)
        if not isinstance(modules, list) or not modules or not all(isinstance(m, str) and m for m in modules):
            raise ConfigError(f"{path}: line {name!r} needs a non-empty list of module paths", hint=HINT)
        markers = item.get("markers", modules)
        if not isinstance(markers, list) or not markers or not all(isinstance(m, str) and m for m in markers):
            raise ConfigError(f"{path}: line {name!r}: `markers` must be a non-empty list of paths", hint=HINT)
        for module in [*modules, *markers]:
            if module.startswith("/") or ".." in module.split("/"):
                raise ConfigError(f"{path}: line {name!r}: {module!r} is not a path inside the wheel", hint=HINT)
        lines.append(Line(name, tuple(modules), tuple(markers)))
    if len({line.name for line in lines}) != len(lines):
        raise ConfigError(f"{path}: two lines share a name", hint=HINT)
    return lines
