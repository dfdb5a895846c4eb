"""What a wheel of ours ships, as one digest: every byte it installs but its build information.

`build` records it in patches/train.toml per tag and level (a tag's level goes up exactly when it changes),
and `publish` compares it with the wheel the index holds for the same vLLM release (a wheel whose files
are the same is skipped; other files under a published level are refused). One function for both, so the
two can never disagree about what changed.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
import zlib
from pathlib import Path

from release.core.errors import BadWheelError
from release.core.files import WHEEL_LIMIT, open_regular, read_member
from release.core.layout import BUILD_INFO_MEMBER as BUILD_INFO
from release.core.parse import parse_json

# What _build_info.json says about how and when a wheel was built, not about what it holds.
BUILD_ONLY_KEYS = ("commit", "source_date_epoch", "version")


def shipped_digest(path: Path, version: str) -> str:
    """`sha256:<hex>` over what the wheel at `path` (of version text `version`) installs, apart from build information.

    Two builds of the same patched tree from different commits differ only in `_build_info.json`'s
    commit and time, the zip's timestamps, RECORD (the hashes of the rest) and, at another patch
    level, the version label; this digest leaves those out and covers every other byte, so a change
    in any module, patch, series line, data file or dependency gives another digest. (A wheel read
    once for every fact, release.overlay.wheel.read_wheel, takes it from the archive it has open.)
    """
    try:
        with open_regular(path, WHEEL_LIMIT, error=BadWheelError) as handle, zipfile.ZipFile(handle) as archive:
            return archive_digest(archive, version, path.name)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise BadWheelError(f"{path.name} has corrupt data ({exc})") from None


def archive_digest(archive: zipfile.ZipFile, version: str, name: str) -> str:
    """shipped_digest of a wheel already open (`name`: its file name, for messages); zip errors are the caller's."""
    rows: list[str] = []
    for info in sorted(archive.infolist(), key=lambda i: i.filename):
        if info.is_dir():
            continue
        top, _, rest = info.filename.partition("/")
        member = f"{{dist-info}}/{rest}" if top.endswith(".dist-info") else info.filename
        if member == "{dist-info}/RECORD":
            continue
        data = read_member(archive, info, error=BadWheelError, what=f"{name}: ")
        if member == "{dist-info}/METADATA" and version:
            data = data.replace(version.encode(), b"{version}")
        elif member == BUILD_INFO:
            data = _without_build_keys(data)
        rows.append(f"{member} {hashlib.sha256(data).hexdigest()}")
    return "sha256:" + hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _without_build_keys(data: bytes) -> bytes:
    try:
        info = parse_json(data, where=BUILD_INFO, error=BadWheelError)
    except BadWheelError:
        return data  # not ours to read (deep nesting too): compared byte for byte
    if not isinstance(info, dict):
        return data
    return json.dumps({k: v for k, v in info.items() if k not in BUILD_ONLY_KEYS}, sort_keys=True).encode()
