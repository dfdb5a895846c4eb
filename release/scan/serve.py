"""How each release line's releases read `vllm serve`: the serve facts the scan ships beside the lines.

The lines themselves (modules, markers, series, `backends`, `live`) are the model's
(release/model/lines.py), which every stage reads. What only the scan ships, for
`vllm-fused-moe doctor -- VLLM_SERVE_ARGS`, is read here from the tables the model's parser keeps (Line.table): a
line's `builds` (backend -> class) and its `[[line.serve]]` ranges (the `--all2all-backend`
choices, how VLLM_ALL2ALL_BACKEND is read, which backends take the DP-chunked path and the
variable that switches it). The model's parser leaves these keys alone; the file is parsed once, there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from release.core.errors import ConfigError
from release.model.lines import Line, Lines

HINT = (
    "patches/lines.toml: a line's `builds` maps each of its `backends` to one of its `live` classes; each "
    '[[line.serve]] has `releases` (a PEP 440 specifier), `all2all_backends`, `backend_env` ("fallback", '
    '"overrides" or "ignored"), `dp_chunked` (some of the line\'s backends) and optionally `dp_chunk_env`'
)
BACKEND_ENV_MODES = ("fallback", "overrides", "ignored")


@dataclass(frozen=True)
class ServeRange:
    """How the releases in `releases` (a specifier) read a `vllm serve` command line and its environment."""

    releases: str
    all2all_backends: tuple[str, ...]  # every value --all2all-backend accepts
    backend_env: str  # how VLLM_ALL2ALL_BACKEND is read: one of BACKEND_ENV_MODES
    dp_chunked: tuple[str, ...]  # the line's backends that take the DP-chunked path
    dp_chunk_env: str | None  # the variable that switches that path; None: no switch (always taken)

    def covers(self, version: str) -> bool:
        return SpecifierSet(self.releases).contains(version, prereleases=True)

    def to_json(self) -> dict[str, object]:
        return {
            "releases": self.releases,
            "all2all_backends": list(self.all2all_backends),
            "backend_env": self.backend_env,
            "dp_chunked": list(self.dp_chunked),
            "dp_chunk_env": self.dp_chunk_env,
        }


@dataclass(frozen=True)
class LineServe:
    """A line's `builds` and its serve ranges."""

    builds: dict[str, str]
    ranges: tuple[ServeRange, ...]

    def range_for(self, version: str) -> ServeRange | None:
        return next((r for r in self.ranges if r.covers(version)), None)


def _names(path: Path, where: str, key: str, value: object, *, empty: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list) or (not value and not empty) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{path}: {where}: `{key}` must be a list of names", hint=HINT)
    if len(set(value)) != len(value):
        raise ConfigError(f"{path}: {where}: `{key}` names one twice", hint=HINT)
    return tuple(value)


def _range(path: Path, line: Line, index: int, raw: object) -> ServeRange:
    where = f"line {line.name!r}, [[line.serve]] #{index + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: {where} is not a table", hint=HINT)
    unknown = set(raw) - {"releases", "all2all_backends", "backend_env", "dp_chunked", "dp_chunk_env"}
    if unknown:
        raise ConfigError(f"{path}: {where}: unknown key(s) {', '.join(sorted(unknown))}", hint=HINT)
    releases = raw.get("releases")
    try:
        if not isinstance(releases, str) or not str(SpecifierSet(releases)):
            raise InvalidSpecifier(str(releases))
    except InvalidSpecifier:
        raise ConfigError(f"{path}: {where}: `releases` {releases!r} is not a PEP 440 specifier", hint=HINT) from None
    choices = _names(path, where, "all2all_backends", raw.get("all2all_backends"))
    if not set(line.backends) <= set(choices):
        missing = ", ".join(sorted(set(line.backends) - set(choices)))
        raise ConfigError(f"{path}: {where}: the line's backends {missing} are not among `all2all_backends`", hint=HINT)
    mode = raw.get("backend_env")
    if mode not in BACKEND_ENV_MODES:
        raise ConfigError(f"{path}: {where}: `backend_env` {mode!r} is not one of {BACKEND_ENV_MODES}", hint=HINT)
    chunked = _names(path, where, "dp_chunked", raw.get("dp_chunked", []), empty=True)
    if not set(chunked) <= set(line.backends):
        raise ConfigError(f"{path}: {where}: `dp_chunked` names a backend the line does not have", hint=HINT)
    switch = raw.get("dp_chunk_env")
    if switch is not None and (not isinstance(switch, str) or not switch.isidentifier()):
        raise ConfigError(f"{path}: {where}: `dp_chunk_env` must be an environment variable name", hint=HINT)
    if switch is not None and not chunked:
        raise ConfigError(f"{path}: {where}: `dp_chunk_env` without `dp_chunked` backends switches nothing", hint=HINT)
    return ServeRange(releases, choices, str(mode), chunked, switch)


def _builds(path: Path, line: Line, raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ConfigError(f"{path}: line {line.name!r}: `builds` must map backend names to class names", hint=HINT)
    if set(raw) != set(line.backends) or not set(raw.values()) <= set(line.live_classes):
        raise ConfigError(
            f"{path}: line {line.name!r}: `builds` must map exactly the line's `backends` "
            f"({', '.join(line.backends)}) to classes of its `live` ({', '.join(line.live_classes)})",
            hint=HINT,
        )
    return {str(k): str(v) for k, v in raw.items()}


def read_serve(path: Path, lines: Lines) -> dict[str, LineServe]:
    """Each line's `builds` and serve ranges (ranges of one line must not overlap), from `lines` as
    read_lines read them from `path` (the command's Checkout: `path` is only named in messages)."""
    out: dict[str, LineServe] = {}
    for line in lines.lines:
        item = line.table
        raw = item.get("serve", [])
        if not isinstance(raw, list):
            raise ConfigError(f"{path}: line {line.name!r}: `serve` must be [[line.serve]] tables", hint=HINT)
        ranges = tuple(_range(path, line, i, r) for i, r in enumerate(raw))
        for i, a in enumerate(ranges):
            for b in ranges[i + 1 :]:
                if _overlap(a, b):
                    raise ConfigError(
                        f"{path}: line {line.name!r}: serve ranges {a.releases!r} and {b.releases!r} overlap", hint=HINT
                    )
        out[line.name] = LineServe(_builds(path, line, item.get("builds")), ranges)
    return out


def _overlap(a: ServeRange, b: ServeRange) -> bool:
    """Whether two ranges share a release. Where two intervals overlap, one holds a bound the other
    names (its lower one, for the `>=X,<Y` ranges lines.toml uses), so the bounds are enough to try."""
    bounds = {s.version for r in (a, b) for s in SpecifierSet(r.releases)}
    return any(a.covers(v) and b.covers(v) for v in bounds)
