"""A wheel given to `publish` or held by the index, read once (release.model.wheel.OverlayWheel): its name,
version and sha256 checked against its METADATA, its members, and for one of ours its build facts (their
vLLM release the one its file name says) and what it ships; `WheelReads`, each wheel once per command."""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
import zlib
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from release.core.errors import BadInputError, BadWheelError
from release.core.files import WHEEL_LIMIT, open_regular, read_member
from release.core.layout import BUILD_INFO_MEMBER
from release.core.parse import parse_json
from release.core.versions import InvalidVersion, Pep440Version, package_version
from release.model.wheel import OverlayWheel
from release.overlay.project import PROJECT
from release.overlay.shipped import archive_digest
from release.pristine.metadata import CoreMetadata, read_metadata


def read_wheel(path: Path) -> OverlayWheel:
    """A wheel's identity, checked against its own metadata (a renamed file is refused), and for a wheel of ours
    its build facts (their vLLM release the one its file name says) and what it ships: one open, one hash."""
    # Opened first: /dev/zero, a FIFO or a directory is refused as what it is, whatever its name.
    with open_wheel(path) as handle:
        return _read(path, handle)


def _read(path: Path, handle: io.BufferedReader) -> OverlayWheel:
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise BadWheelError(f"{path.name} is not a wheel file name ({exc})") from None
    info: dict[str, Any] | None = None
    shipped = ""
    try:
        with zipfile.ZipFile(handle) as archive:
            members = tuple(archive.namelist())
            metadata_names = [n for n in members if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(metadata_names) != 1:
                raise BadWheelError(f"{path.name} has {len(metadata_names)} .dist-info/METADATA files, expected one")
            raw = read_member(archive, metadata_names[0], error=BadWheelError, what=f"{path.name}: ")
            metadata, meta_version = _metadata(path, name, version, raw)
            if name == PROJECT:
                info = _build_info(archive, members)
                shipped = archive_digest(archive, meta_version, path.name)
            handle.seek(0)
            sha256 = hashlib.file_digest(handle, "sha256").hexdigest()
    except zipfile.BadZipFile as exc:
        what = "is not a zip archive" if "not a zip" in str(exc).lower() else f"has corrupt data ({exc})"
        raise BadWheelError(f"{path.name} {what}") from None
    except (zlib.error, EOFError, OSError, ValueError) as exc:
        raise BadWheelError(f"{path.name} has corrupt data ({exc})") from None
    said = info.get("vllm_version") if info is not None else None
    if isinstance(said, str) and said != version.public:
        raise BadWheelError(f"{path.name} is named for vLLM {version.public}, but its build facts say vLLM {said}")
    return OverlayWheel(path, name, version, sha256, metadata.requires_python, meta_version, members, info, shipped)


def _metadata(path: Path, name: str, version: Pep440Version, raw: bytes) -> tuple[CoreMetadata, str]:
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
    return metadata, meta_version


def _build_info(archive: zipfile.ZipFile, members: tuple[str, ...]) -> dict[str, Any] | None:
    if BUILD_INFO_MEMBER not in members:
        return None
    try:
        info = parse_json(read_member(archive, BUILD_INFO_MEMBER), where=BUILD_INFO_MEMBER)
    except BadInputError:
        return None  # not facts we can read: nothing to judge by them (the gates say what they need)
    return info if isinstance(info, dict) else None


class WheelReads:
    """Each wheel one command reads, read once: the wheels it is given and those the index holds, which the
    plan, the repair and the pages ask for again. Kept by path and file identity (device, inode, size,
    mtime), so a file replaced or changed since is read again."""

    def __init__(self) -> None:
        self._read: dict[tuple[Path, int, int, int, int], OverlayWheel] = {}

    def __call__(self, path: Path) -> OverlayWheel:
        try:
            status = path.stat()
        except OSError:
            return read_wheel(path)  # read_wheel says what is wrong with it
        key = (path.absolute(), status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
        found = self._read.get(key)
        if found is None:
            found = self._read[key] = read_wheel(path)
        return found


def open_wheel(path: Path) -> io.BufferedReader:
    """A wheel to publish, open: a regular file (a link to one is fine) of at most WHEEL_LIMIT bytes.

    `/dev/zero`, a FIFO or a directory named `*.whl` is refused at once (exit 2), before a byte is
    read: zip reading seeks and reads to the end, which a device or a pipe never reaches.
    """
    return open_regular(path, WHEEL_LIMIT, error=BadWheelError)


def is_dirty(version: Pep440Version) -> bool:
    """A version `build --allow-dirty` made: its local label ends in `.dirty` (0.20.0+fm.1.dirty)."""
    return version.local is not None and version.local.split(".")[-1] == "dirty"
