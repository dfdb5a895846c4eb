"""The release train (patches/train.toml): every vLLM release we ship an overlay for.

Each entry says where that tag's pristine code came from (wheel file and sha256, or git
commit), the sha256 of every pristine file, and of every file after the series. vendor/
holds one tag of the train (the head); every other tag is rebuilt from its pristine source
and the series and must reproduce these hashes byte for byte (`release train check`).
Parsed once, validated with clear errors, written back byte-stably.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from release.core.errors import ConfigError
from release.core.versions import parse_version, version_of_tag
from release.pristine.tree import UpstreamTree
from release.queue.pin import Pin

SHA256_RE = re.compile(r"[0-9a-f]{64}")
DEFAULT_LINE = "prepare_finalize"


@dataclass(frozen=True)
class TrainEntry:
    tag: str
    source: str  # how it was read: "pypi", "wheel:PATH", "git+URL", ...
    line: str = DEFAULT_LINE  # the release line: which upstream modules are vendored
    wheel: str = ""
    wheel_sha256: str = ""
    commit: str = ""
    flashinfer: str = ""  # the tag's own pin, e.g. "flashinfer-python==0.6.6"
    pristine: dict[str, str] = field(default_factory=dict)  # path in the line's subtree -> sha256
    patched: dict[str, str] = field(default_factory=dict)  # the same after the series

    @property
    def version(self) -> str:
        return version_of_tag(self.tag)

    @classmethod
    def of(
        cls, upstream: UpstreamTree, patched: dict[str, str], line: str = DEFAULT_LINE, source: str = ""
    ) -> TrainEntry:
        """The entry for `upstream` (its provenance and pristine hashes) with the hashes after the series."""
        return cls(
            tag=upstream.tag,
            source=source or upstream.source,
            line=line,
            wheel=upstream.wheel,
            wheel_sha256=upstream.wheel_sha256,
            commit=upstream.commit,
            flashinfer=upstream.flashinfer,
            pristine=upstream.file_hashes(),
            patched=patched,
        )

    def pin(self, subtree: str) -> Pin:
        """This tag as the pin of a build: its provenance and pristine hashes, for `subtree`."""
        return Pin(
            tag=self.tag,
            source=self.source,
            subtree=subtree,
            flashinfer=self.flashinfer,
            wheel=self.wheel,
            wheel_sha256=self.wheel_sha256,
            commit=self.commit,
            files=self.pristine,
        )


@dataclass(frozen=True)
class Train:
    entries: tuple[TrainEntry, ...]

    @property
    def tags(self) -> list[str]:
        return [entry.tag for entry in self.entries]

    def get(self, tag: str) -> TrainEntry | None:
        return next((entry for entry in self.entries if entry.tag == tag), None)

    def with_entry(self, entry: TrainEntry) -> Train:
        """The train with `entry` added, or replacing the entry of the same tag; oldest first."""
        kept = [e for e in self.entries if e.tag != entry.tag]
        return Train(tuple(sorted([*kept, entry], key=lambda e: _order(e.tag))))

    def without(self, tag: str) -> Train:
        return Train(tuple(e for e in self.entries if e.tag != tag))

    @classmethod
    def load(cls, path: Path) -> Train:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path} is missing", hint="restore patches/train.toml from git") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
        raw = data.get("release", [])
        if not isinstance(raw, list):
            raise ConfigError(f"{path}: `release` must be an array of tables ([[release]])")
        entries = [_entry(path, index, item) for index, item in enumerate(raw)]
        tags = [e.tag for e in entries]
        duplicates = sorted({t for t in tags if tags.count(t) > 1})
        if duplicates:
            raise ConfigError(f"{path}: {', '.join(duplicates)} listed twice")
        return cls(tuple(sorted(entries, key=lambda e: _order(e.tag))))

    def dumps(self) -> str:
        lines = [
            "# The release train: every vLLM release we ship an overlay for, oldest first.",
            "# Written by `python -m release train add|remove` and `rebase`; `train check` proves",
            "# that pristine(tag) + patches/series reproduces every hash below, byte for byte.",
        ]
        for e in self.entries:
            lines += [
                "",
                "[[release]]",
                f"tag = {_toml_str(e.tag)}",
                f"line = {_toml_str(e.line)}",
                f"source = {_toml_str(e.source)}",
                f"wheel = {_toml_str(e.wheel)}",
                f"wheel_sha256 = {_toml_str(e.wheel_sha256)}",
                f"commit = {_toml_str(e.commit)}",
                f"flashinfer = {_toml_str(e.flashinfer)}",
                "",
                "[release.pristine]",
                *(f"{_toml_str(name)} = {_toml_str(digest)}" for name, digest in sorted(e.pristine.items())),
                "",
                "[release.patched]",
                *(f"{_toml_str(name)} = {_toml_str(digest)}" for name, digest in sorted(e.patched.items())),
            ]
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> None:
        path.write_text(self.dumps(), encoding="utf-8")


def _order(tag: str) -> tuple[int, int, int, int]:
    parsed = parse_version(tag)
    return parsed[0].key if parsed else (0, 0, 0, -1)


def _entry(path: Path, index: int, item: object) -> TrainEntry:
    where = f"{path}: release #{index + 1}"
    if not isinstance(item, dict):
        raise ConfigError(f"{where} is not a table")
    for key in ("tag", "source"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise ConfigError(f"{where}: `{key}` is missing")
    tag = item["tag"]
    version_of_tag(tag)  # a malformed tag is bad input with its own message
    texts: dict[str, str] = {}
    for key in ("line", "wheel", "wheel_sha256", "commit", "flashinfer"):
        value = item.get(key, DEFAULT_LINE if key == "line" else "")
        if not isinstance(value, str):
            raise ConfigError(f"{where} ({tag}): `{key}` must be a string")
        texts[key] = value
    tables: dict[str, dict[str, str]] = {}
    for key in ("pristine", "patched"):
        table = item.get(key, {})
        if not isinstance(table, dict) or not table:
            raise ConfigError(f"{where} ({tag}): [release.{key}] is missing or empty")
        for name, digest in table.items():
            if not (isinstance(digest, str) and SHA256_RE.fullmatch(digest)):
                raise ConfigError(f"{where} ({tag}): {key} {name!r} is not a sha256 hex digest")
            if name.startswith("/") or ".." in name.split("/"):
                raise ConfigError(f"{where} ({tag}): {key} {name!r} leaves the subtree")
        tables[key] = dict(sorted(table.items()))
    return TrainEntry(
        tag=tag,
        source=item["source"],
        line=texts["line"],
        wheel=texts["wheel"],
        wheel_sha256=texts["wheel_sha256"],
        commit=texts["commit"],
        flashinfer=texts["flashinfer"],
        pristine=tables["pristine"],
        patched=tables["patched"],
    )


def _toml_str(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
