"""Is the evidence read of the wheel installed here? (issue 43: evidence binds to the installed wheel)

The evidence names its wheel by file name and sha256. The doctor reads that wheel from the index
(`INDEX/simple/vllm-fused-moe/<wheel>`, where `publish` puts it), bounded like the evidence: its
sha256 must be the evidence's, and the files installed here must be its files, hash for hash, as the
install record (RECORD) lists them against the wheel's own RECORD. A wheel rebuilt under the same
name, evidence copied from another wheel, an impostor installed under our version: each is a
`problem` that names what disagrees.
"""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
from importlib import metadata

from .reading import ReadFailed, read_url
from .records import EvidenceRead
from .verdict import index_base
from .words import PROJECT

WHEEL_LIMIT = 64 << 20  # our wheels are a few hundred kB
RECORD_LIMIT = 4 << 20


def binding_problem(index_url: str, read: EvidenceRead, timeout: float) -> str | None:
    """Why the evidence `read` is not that of the wheel installed here, or None."""
    if not read.wheel_sha256:
        return "it names no sha256 of its wheel"
    url = f"{index_base(index_url)}/simple/{PROJECT}/{read.wheel}"
    try:
        wheel = read_url(url, WHEEL_LIMIT, timeout)
    except ReadFailed as exc:
        return f"the wheel it is of, {read.wheel}, could not be read from the index to compare: {exc}"
    digest = hashlib.sha256(wheel).hexdigest()
    if digest != read.wheel_sha256:
        return (
            f"it is the evidence of a wheel with sha256 {read.wheel_sha256[:16]}..., not of the index's {read.wheel} "
            f"(sha256 {digest[:16]}...): another build under the same name"
        )
    return installed_problem(wheel, read.wheel)


def wheel_record(wheel: bytes) -> dict[str, str]:
    """path -> `sha256=...` of the wheel's own RECORD (its files with a hash)."""
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
        if len(names) != 1:
            raise ValueError("no single .dist-info/RECORD")
        info = archive.getinfo(names[0])
        if info.file_size > RECORD_LIMIT:
            raise ValueError("its RECORD is too large")
        text = archive.read(info).decode("utf-8")
    return {row[0]: row[1] for row in csv.reader(io.StringIO(text)) if len(row) >= 2 and row[1]}


def installed_problem(wheel: bytes, name: str) -> str | None:
    """Why the files installed here are not those of `wheel`, or None."""
    try:
        wanted = wheel_record(wheel)
    except (ValueError, zipfile.BadZipFile, UnicodeDecodeError, csv.Error) as exc:
        return f"the index's {name} is no wheel whose RECORD can be read ({exc})"
    try:
        files = metadata.distribution(PROJECT).files
    except metadata.PackageNotFoundError:
        files = None
    if files is None:
        return f"the install record (RECORD) is gone: the files installed here cannot be matched with {name}"
    have = {str(f): f"{f.hash.mode}={f.hash.value}" for f in files if f.hash is not None}
    for path, digest in sorted(wanted.items()):
        if have.get(path) != digest:
            return f"the files installed here are not those of the index's {name}: {path} differs"
    return None
