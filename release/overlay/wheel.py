"""A wheel given to `publish` or held by the index, read: its name, version and sha256, checked against its METADATA."""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from release.core.errors import BadWheelError
from release.core.files import WHEEL_LIMIT, open_regular, read_member
from release.core.versions import InvalidVersion, Pep440Version, package_version
from release.pristine.metadata import read_metadata


@dataclass(frozen=True)
class Wheel:
    path: Path
    project: str  # PEP 503 normalised name
    version: Pep440Version
    sha256: str
    requires_python: str
    metadata_version: str = ""  # the Version header as written, which METADATA repeats in its text

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def vllm(self) -> str:
        """The vLLM release an overlay wheel is for: its version without our `+fm.N` label."""
        return self.version.public


def inspect_wheel(path: Path) -> Wheel:
    """A wheel's identity, checked against its own metadata (a renamed file is refused)."""
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise BadWheelError(f"{path.name} is not a wheel file name ({exc})") from None
    try:
        with open_wheel(path) as handle, zipfile.ZipFile(handle) as archive:
            metadata_names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(metadata_names) != 1:
                raise BadWheelError(f"{path.name} has {len(metadata_names)} .dist-info/METADATA files, expected one")
            raw = read_member(archive, metadata_names[0], error=BadWheelError, what=f"{path.name}: ")
            handle.seek(0)
            sha256 = hashlib.file_digest(handle, "sha256").hexdigest()
    except zipfile.BadZipFile as exc:
        what = "is not a zip archive" if "not a zip" in str(exc).lower() else f"has corrupt data ({exc})"
        raise BadWheelError(f"{path.name} {what}") from None
    except (zlib.error, EOFError, OSError, ValueError) as exc:
        raise BadWheelError(f"{path.name} has corrupt data ({exc})") from None
    try:
        metadata = read_metadata(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadWheelError(f"{path.name}: its .dist-info/METADATA is not UTF-8 text") from None
    meta_name, meta_version = metadata.name, metadata.version
    try:
        parsed_version = package_version(meta_version)
    except InvalidVersion:
        raise BadWheelError(f"{path.name}: its METADATA Version {meta_version!r} is not a PEP 440 version") from None
    if canonicalize_name(meta_name) != name or parsed_version != version:
        raise BadWheelError(
            f"{path.name} says it is {meta_name} {meta_version} inside: its name clashes with its metadata"
        )
    return Wheel(path, name, version, sha256, metadata.requires_python, meta_version)


def open_wheel(path: Path) -> io.BufferedReader:
    """A wheel to publish, open: a regular file (a link to one is fine) of at most WHEEL_LIMIT bytes.

    `/dev/zero`, a FIFO or a directory named `*.whl` is refused at once (exit 2), before a byte is
    read: zip reading seeks and reads to the end, which a device or a pipe never reaches.
    """
    return open_regular(path, WHEEL_LIMIT, error=BadWheelError)


def is_dirty(version: Pep440Version) -> bool:
    """A version `build --allow-dirty` made: its local label ends in `.dirty` (0.20.0+fm.1.dirty)."""
    return version.local is not None and version.local.split(".")[-1] == "dirty"
