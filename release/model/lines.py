"""patches/lines.toml: the release lines, each a set of module paths inside a vLLM wheel and its series.

A line is a run of vLLM releases that keep the code our patches change in the same modules.
Each line names its `modules` (upstream paths: a prefix ending in "/" is a package directory,
anything else one file), the `markers` that put a release on it (files it must have, and
optionally text those files must contain), and its `series` file. A series names common
patches (patches/NNNN-*.patch) and the line's own variants (patches/lines/<line>/NNNN-*.patch,
whose `Varies:` trailer names the common patch they stand in for); a variant is looked up in
the line's folder first. Files of a line are keyed by their path below the line's `root`,
the deepest directory holding all its modules, so the head line keeps the keys it always had.
A line's optional `maps` ([line.maps]) says which of its files holds the code of a head file
(an upstream path of the head line -> one of the line's): `pq carry` moves a common patch onto
the line along it; a head path inside the line's own modules maps to itself.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from release.core.errors import ConfigError
from release.core.files import read_text
from release.core.parse import parse_toml

HINT = (
    "patches/lines.toml holds [[line]] tables with `name`, `modules`, `markers` (paths in the wheel), "
    "optional [line.contains] and [line.maps], and `series` (a path in the checkout)"
)
HEAD_LINE = "prepare_finalize"


@dataclass(frozen=True)
class Line:
    name: str
    modules: tuple[str, ...]  # what is read: a prefix ending in "/" is a package directory, else one file
    markers: tuple[str, ...]  # a release is on the line when it has all of these (default: the modules)
    series: str = "patches/series"  # relative to the checkout
    contains: tuple[tuple[str, str], ...] = ()  # (marker file, text it must contain)
    note: str = ""  # where the affected code lives, for docs/affected-releases.md
    fires: str = ""  # when the double reduce actually happens on this line, for the same page
    backends: tuple[str, ...] = ()  # the --all2all-backend names of its FlashInfer all-to-all classes
    # What `doctor --live` imports: the module vLLM's factory takes the classes from, and the classes
    # the line's fix makes return output_is_reduced() True (shipped in the scan data, read by doctor.py).
    live_module: str = ""
    live_classes: tuple[str, ...] = ()
    # {head line's upstream path: the line's path holding that code} (`pq carry`); see map_path().
    maps: tuple[tuple[str, str], ...] = ()
    # The line's [[line]] table as lines.toml has it: the keys only the scan ships (`builds`, [[line.serve]])
    # are read from here by release/scan/serve.py, so patches/lines.toml is parsed once, here.
    table: dict[str, object] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def map_path(self, head_path: str) -> str | None:
        """The line's file that holds the code of the head's `head_path`, or None: it has no counterpart."""
        mapped = dict(self.maps).get(head_path)
        if mapped is not None:
            return mapped
        return head_path if any(_matches(head_path, module) for module in self.modules) else None

    def wants(self, member: str) -> bool:
        """Is this wheel member one of the line's modules (bytecode left out)?"""
        if "__pycache__" in member or member.endswith((".pyc", "/")):
            return False
        return any(_matches(member, module) for module in self.modules)

    def present(self, names: list[str], files: dict[str, bytes] | None = None) -> bool:
        """Is a release with these members on this line (every marker, and every text it must hold)?"""
        if not all(any(_matches(name, marker) for name in names) for marker in self.markers):
            return False
        for path, text in self.contains:
            data = (files or {}).get(path)
            if data is None or text.encode("utf-8") not in data:
                return False
        return True

    @property
    def root(self) -> str:
        """The deepest directory holding every module; the line's files are keyed below it."""
        dirs = [m.rstrip("/") if m.endswith("/") else posixpath.dirname(m) for m in self.modules]
        return posixpath.commonpath(dirs)

    @property
    def prefixes(self) -> tuple[str, ...]:
        """What a patch of this line may touch: the modules themselves (upstream paths)."""
        return self.modules

    def relative(self, files: dict[str, bytes]) -> dict[str, bytes]:
        """The line's members of `files` (keyed by wheel path), keyed below `root`."""
        cut = len(self.root) + 1
        return {name[cut:]: data for name, data in sorted(files.items()) if self.wants(name)}

    def series_path(self, root: Path) -> Path:
        return root / self.series

    def patch_dir(self, root: Path) -> Path:
        """Where the line's own variants live (patches/lines/<name>/); the head line has none."""
        return root / "patches" / "lines" / self.name

    def targets(self, directory: str) -> dict[str, str]:
        """The upstream module names the overlay serves, each mapped to its path in the package.

        `directory` is where the line's files sit inside vllm_fused_moe/ (e.g. "prepare_finalize").
        A package maps to a path ending in "/"; a single module to its file. Never a parent package:
        vLLM keeps its own `fused_moe/__init__.py`.
        """
        out: dict[str, str] = {}
        cut = len(self.root) + 1
        for module in self.modules:
            if module.endswith("/"):
                rel = module.rstrip("/")[cut:]
                out[module.rstrip("/").replace("/", ".")] = (
                    posixpath.join(directory, rel, "") if rel else directory + "/"
                )
            else:
                out[module.removesuffix(".py").replace("/", ".")] = posixpath.join(directory, module[cut:])
        return out

    @property
    def overlay_dir(self) -> str:
        """The folder inside vllm_fused_moe/ that holds this line's files: the root's last part."""
        return posixpath.basename(self.root)


@dataclass(frozen=True)
class LeftOut:
    """Releases that have the affected backend but that no flag of ours can fix, and why."""

    releases: str  # a PEP 440 specifier over vLLM versions
    reason: str


@dataclass(frozen=True)
class Lines:
    lines: tuple[Line, ...]
    left_out: tuple[LeftOut, ...] = field(default=())

    def get(self, name: str) -> Line:
        for line in self.lines:
            if line.name == name:
                return line
        known = ", ".join(line.name for line in self.lines)
        raise ConfigError(f"no release line {name!r} in patches/lines.toml (lines: {known})", hint=HINT)


def _matches(member: str, module: str) -> bool:
    return member.startswith(module) if module.endswith("/") else member == module


def _paths(path: Path, name: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(m, str) and m for m in value):
        raise ConfigError(f"{path}: line {name!r}: `{key}` must be a non-empty list of paths", hint=HINT)
    for module in value:
        if module.startswith("/") or ".." in module.split("/"):
            raise ConfigError(f"{path}: line {name!r}: {module!r} is not a path inside the wheel", hint=HINT)
    return tuple(value)


def _line(path: Path, index: int, item: object) -> Line:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise ConfigError(f"{path}: line #{index + 1} has no name", hint=HINT)
    name: str = item["name"]
    if not isinstance(item.get("modules"), list) or not item["modules"]:
        raise ConfigError(f"{path}: line {name!r} needs a non-empty list of module paths", hint=HINT)
    modules = _paths(path, name, "modules", item["modules"])
    markers = _paths(path, name, "markers", item.get("markers", list(modules)))
    contains: list[tuple[str, str]] = []
    raw = item.get("contains", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: line {name!r}: [line.contains] must map a marker to a list of texts", hint=HINT)
    for marker, texts in raw.items():
        if marker not in markers or not isinstance(texts, list) or not all(isinstance(t, str) and t for t in texts):
            raise ConfigError(f"{path}: line {name!r}: contains {marker!r} must be a marker with texts", hint=HINT)
        contains += [(marker, text) for text in texts]
    series = item.get("series", "patches/series")
    if not isinstance(series, str) or series.startswith("/") or ".." in series.split("/"):
        raise ConfigError(f"{path}: line {name!r}: `series` must be a path inside the checkout", hint=HINT)
    note, fires = item.get("note", ""), item.get("fires", "")
    if not isinstance(note, str) or not isinstance(fires, str):
        raise ConfigError(f"{path}: line {name!r}: `note` and `fires` are strings", hint=HINT)
    backends = item.get("backends", [])
    if not isinstance(backends, list) or not all(isinstance(b, str) and b for b in backends):
        raise ConfigError(f"{path}: line {name!r}: `backends` is a list of --all2all-backend names", hint=HINT)
    live_module, live_classes = _live(path, name, item.get("live"))
    return Line(
        name,
        modules,
        markers,
        series,
        tuple(contains),
        note,
        fires,
        tuple(backends),
        live_module,
        live_classes,
        _maps(path, name, modules, item.get("maps", {})),
        item,
    )


def _maps(path: Path, name: str, modules: tuple[str, ...], raw: object) -> tuple[tuple[str, str], ...]:
    why = f"{path}: line {name!r}: [line.maps] maps a head file's upstream path to one of the line's module files"
    if not isinstance(raw, dict):
        raise ConfigError(why, hint=HINT)
    out = []
    for head, mine in raw.items():
        if not isinstance(mine, str) or not any(_matches(mine, module) for module in modules):
            raise ConfigError(f"{why}: {mine!r} is not in the line's modules", hint=HINT)
        for value in (head, mine):
            if value.startswith("/") or ".." in value.split("/") or not value.endswith(".py"):
                raise ConfigError(f"{why}: {value!r} is not a module file's path inside the wheel", hint=HINT)
        out.append((head, mine))
    return tuple(sorted(out))


def _live(path: Path, name: str, raw: object) -> tuple[str, tuple[str, ...]]:
    if raw is None:
        return "", ()
    why = f'{path}: line {name!r}: `live` is {{ module = "dotted.module", classes = ["ClassName", ...] }}'
    if not isinstance(raw, dict) or set(raw) != {"module", "classes"}:
        raise ConfigError(why, hint=HINT)
    module, classes = raw["module"], raw["classes"]
    if not isinstance(module, str) or not all(part.isidentifier() for part in module.split(".")):
        raise ConfigError(why, hint=HINT)
    if (
        not isinstance(classes, list)
        or not classes
        or not all(isinstance(c, str) and c.isidentifier() for c in classes)
    ):
        raise ConfigError(why, hint=HINT)
    return module, tuple(classes)


def read_lines(path: Path) -> Lines:
    text = read_text(path, error=ConfigError, hint="restore patches/lines.toml from git")
    data = parse_toml(text, where=str(path), error=ConfigError, hint=HINT)
    items = data.get("line")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{path} defines no [[line]]", hint=HINT)
    lines = [_line(path, index, item) for index, item in enumerate(items)]
    if len({line.name for line in lines}) != len(lines):
        raise ConfigError(f"{path}: two lines share a name", hint=HINT)
    left = []
    for item in data.get("left_out", []):
        if not isinstance(item, dict) or not isinstance(item.get("releases"), str) or not item.get("reason"):
            raise ConfigError(f"{path}: each [[left_out]] needs `releases` (a specifier) and `reason`", hint=HINT)
        left.append(LeftOut(item["releases"], str(item["reason"])))
    return Lines(tuple(lines), tuple(left))


def load_lines(path: Path) -> list[Line]:
    return list(read_lines(path).lines)
