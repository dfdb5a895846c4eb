"""The data model of the patch queue: the upstream pin, the series and one patch.

Each is parsed once, validated with a clear error, and written back byte-stably, so
that a rebase with nothing to do changes no byte on disk.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from release.errors import ConfigError, MalformedPatchError, MalformedSeriesError
from release.layout import UPSTREAM_SUBTREE

UPSTREAM_SUBTREE_PREFIX = UPSTREAM_SUBTREE + "/"

TAG_RE = re.compile(r"^v?(?P<version>\d+\.\d+\.\d+(?:\.post\d+)?)$")


def version_of_tag(tag: str) -> str:
    """'v0.20.0' -> '0.20.0'; anything that is not a plain release tag is bad input."""
    match = TAG_RE.match(tag)
    if not match:
        from release.errors import UnknownTagError

        raise UnknownTagError(f"{tag!r} is not a vLLM release tag (expected vX.Y.Z)")
    return match.group("version")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file read in blocks: release wheels are ~240 MB."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- pin


@dataclass(frozen=True)
class Pin:
    """vendor/vllm_fused_moe/UPSTREAM.toml: which upstream the pristine subtree came from."""

    tag: str
    source: str
    subtree: str
    flashinfer: str = ""
    wheel: str = ""
    wheel_sha256: str = ""
    commit: str = ""
    files: dict[str, str] = field(default_factory=dict)

    @property
    def version(self) -> str:
        return version_of_tag(self.tag)

    @classmethod
    def load(cls, path: Path) -> "Pin":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path} is missing") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
        upstream = data.get("upstream")
        files = data.get("files")
        if not isinstance(upstream, dict) or not isinstance(files, dict):
            raise ConfigError(f"{path} needs an [upstream] and a [files] table")
        for key in ("tag", "source", "subtree"):
            if not isinstance(upstream.get(key), str) or not upstream[key]:
                raise ConfigError(f"{path}: [upstream] {key} is missing")
        for name, digest in files.items():
            if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
                raise ConfigError(f"{path}: [files] {name!r} is not a sha256 hex digest")
        return cls(
            tag=upstream["tag"],
            source=upstream["source"],
            subtree=upstream["subtree"],
            flashinfer=upstream.get("flashinfer", ""),
            wheel=upstream.get("wheel", ""),
            wheel_sha256=upstream.get("wheel_sha256", ""),
            commit=upstream.get("commit", ""),
            files=dict(sorted(files.items())),
        )

    def dumps(self) -> str:
        lines = [
            "# Written by `python -m release rebase`; never edit by hand.",
            "# The pristine upstream subtree that vendor/ is built from, and each file's sha256.",
            "[upstream]",
            f"tag = {_toml_str(self.tag)}",
            f"source = {_toml_str(self.source)}",
            f"subtree = {_toml_str(self.subtree)}",
            f"flashinfer = {_toml_str(self.flashinfer)}",
            f"wheel = {_toml_str(self.wheel)}",
            f"wheel_sha256 = {_toml_str(self.wheel_sha256)}",
            f"commit = {_toml_str(self.commit)}",
            "",
            "[files]",
        ]
        lines += [f"{_toml_str(name)} = {_toml_str(digest)}" for name, digest in sorted(self.files.items())]
        return "\n".join(lines) + "\n"


def _toml_str(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


# ------------------------------------------------------------------------ series


@dataclass(frozen=True)
class Series:
    """patches/series: the order of the queue. Comments and blank lines survive a rewrite."""

    lines: tuple[str, ...]

    @classmethod
    def load(cls, path: Path) -> "Series":
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MalformedSeriesError(f"{path} is missing") from None
        series = cls(tuple(text.splitlines()))
        seen: set[str] = set()
        for name in series.names:
            if "/" in name or not name.endswith(".patch"):
                raise MalformedSeriesError(f"{path}: {name!r} is not a patch file name in patches/")
            if name in seen:
                raise MalformedSeriesError(f"{path}: {name!r} is listed twice")
            seen.add(name)
            if not (path.parent / name).is_file():
                raise MalformedSeriesError(f"{path} names {name!r}, which is not in {path.parent}")
        return series

    @property
    def names(self) -> list[str]:
        return [entry for entry in (_series_entry(line) for line in self.lines) if entry]

    def without(self, name: str) -> "Series":
        return Series(tuple(line for line in self.lines if _series_entry(line) != name))

    def dumps(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""


def _series_entry(line: str) -> str:
    return line.split("#", 1)[0].strip()


# ------------------------------------------------------------------------- patch

DIFF_FILE_RE = re.compile(r"^diff --git a/(?P<a>\S+) b/(?P<b>\S+)$", re.M)
HUNK_COUNTS_RE = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")
TRAILER_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9-]*): (?P<value>.*)$")


@dataclass(frozen=True)
class Hunk:
    path: str
    header: str
    lines: tuple[str, ...]  # each starts with ' ', '-' or '+'

    @property
    def pre_image(self) -> list[str]:
        return [line[1:] for line in self.lines if line[:1] in (" ", "-")]

    @property
    def post_image(self) -> list[str]:
        return [line[1:] for line in self.lines if line[:1] in (" ", "+")]

    @property
    def removed(self) -> list[str]:
        return [line[1:] for line in self.lines if line.startswith("-")]

    @property
    def added(self) -> list[str]:
        return [line[1:] for line in self.lines if line.startswith("+")]


@dataclass(frozen=True)
class Patch:
    """One `git format-patch` mail in patches/, with DEP-3 style trailers in its message."""

    name: str
    text: str

    @classmethod
    def load(cls, path: Path) -> "Patch":
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MalformedPatchError(f"{path} is missing") from None
        except UnicodeDecodeError:
            raise MalformedPatchError(f"{path} is not UTF-8 text") from None
        patch = cls(path.name, text)
        patch.validate()
        return patch

    def validate(self) -> None:
        if not self.text.startswith("From "):
            raise MalformedPatchError(f"{self.name}: not a `git format-patch` mail (no 'From ' line)")
        if not self.subject:
            raise MalformedPatchError(f"{self.name}: no Subject: header")
        if not DIFF_FILE_RE.search(self.text):
            raise MalformedPatchError(f"{self.name}: holds no `diff --git` section")
        hunks = self.hunks
        if not hunks:
            raise MalformedPatchError(f"{self.name}: holds no hunk")
        for path in self.files:
            if not path.startswith(UPSTREAM_SUBTREE_PREFIX):
                raise MalformedPatchError(
                    f"{self.name}: touches {path}, outside {UPSTREAM_SUBTREE_PREFIX}",
                    hint="patches use upstream paths inside the vendored subtree only",
                )

    @property
    def header(self) -> str:
        return self.text.split("\n\n", 1)[0]

    @property
    def subject(self) -> str:
        match = re.search(r"^Subject: (.*(?:\n .*)*)", self.header, re.M)
        return " ".join(part.strip() for part in match.group(1).splitlines()) if match else ""

    @property
    def author(self) -> str:
        match = re.search(r"^From: (.*(?:\n .*)*)", self.header, re.M)
        return " ".join(part.strip() for part in match.group(1).splitlines()) if match else ""

    @property
    def message(self) -> str:
        """The commit message body (after the headers, before the diff)."""
        body = self.text.split("\n\n", 1)[1] if "\n\n" in self.text else ""
        cut = re.search(r"^(---\n|diff --git )", body, re.M)
        return body[: cut.start()].rstrip("\n") if cut else body.rstrip("\n")

    @property
    def trailers(self) -> dict[str, str]:
        paragraphs = self.message.split("\n\n")
        found: dict[str, str] = {}
        for line in paragraphs[-1].splitlines() if paragraphs else []:
            match = TRAILER_RE.match(line)
            if match:
                found[match.group("key")] = match.group("value")
        return found

    @property
    def diff(self) -> str:
        match = re.search(r"^diff --git ", self.text, re.M)
        return self.text[match.start():] if match else ""

    @property
    def files(self) -> list[str]:
        return [m.group("b") for m in DIFF_FILE_RE.finditer(self.text)]

    @property
    def hunks(self) -> list[Hunk]:
        """Hunks read by their header's line counts, so a short or long body is caught."""
        hunks: list[Hunk] = []
        for section in re.split(r"(?=^diff --git )", self.diff, flags=re.M):
            file_match = DIFF_FILE_RE.match(section)
            if not file_match:
                continue
            lines = section.split("\n")
            index = 0
            while index < len(lines):
                header = HUNK_COUNTS_RE.match(lines[index])
                index += 1
                if not header:
                    continue
                old_left = int(header.group("old") or 1)
                new_left = int(header.group("new") or 1)
                body: list[str] = []
                while (old_left > 0 or new_left > 0) and index < len(lines):
                    line = lines[index]
                    kind = line[:1]
                    if kind == "\\":  # "\ No newline at end of file" belongs to the line before
                        index += 1
                        continue
                    if kind not in (" ", "-", "+"):
                        break
                    old_left -= kind in (" ", "-")
                    new_left -= kind in (" ", "+")
                    body.append(line)
                    index += 1
                if old_left or new_left:
                    raise MalformedPatchError(
                        f"{self.name}: hunk {lines[index - len(body) - 1]!r} in {file_match.group('b')} is corrupt "
                        f"(its body ends {max(old_left, new_left)} line(s) short of what its header says)"
                    )
                hunks.append(Hunk(file_match.group("b"), lines[index - len(body) - 1], tuple(body)))
        return hunks

    def with_trailer(self, key: str, value: str) -> "Patch":
        """The same mail with `key: value` set in the trailer block (added or replaced)."""
        message = self.message
        paragraphs = message.split("\n\n")
        trailer_lines = paragraphs[-1].splitlines()
        line = f"{key}: {value}"
        replaced = [line if TRAILER_RE.match(t) and t.split(":", 1)[0] == key else t for t in trailer_lines]
        if replaced == trailer_lines:
            replaced.append(line)
        new_message = "\n\n".join(paragraphs[:-1] + ["\n".join(replaced)])
        return replace(self, text=self.text.replace(message, new_message, 1))

    @property
    def slug(self) -> str:
        return re.sub(r"^\d{4}-", "", self.name.removesuffix(".patch"))



