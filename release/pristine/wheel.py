"""Read vLLM's modules out of a release wheel: a local file, the cache, or the index over range requests.

What is verified, and against what (docs/patch-queue.md, "What a wheel read verifies"):
- every member we use (the modules, METADATA) against the sha256 the wheel's own RECORD lists
  for it, and zip's CRC-32 while inflating it; a member missing from RECORD is refused;
- a whole wheel in the cache, or downloaded, against the index's sha256 of the file: a
  truncated or corrupted cached wheel is reported, deleted and downloaded again;
- a lazy read (range requests, no whole file) against the index's file size; the index's
  sha256 is what we record as the wheel's identity (`wheel_sha256`), the same value a full
  download is checked against, so pins and the train compare across both ways of reading.

The cache, per release, under $VLLM_FUSED_MOE_CACHE/wheels/<version>/ (default
~/.cache/vllm-fused-moe/wheels/): the whole wheel where one was downloaded; `<wheel>.index.json`,
the index's entry for it, so a later run verifies the cache without the network; and
`<wheel>.members.zip`, the members a lazy read fetched (with RECORD and METADATA), so a
second read of the same modules is offline.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from release.core.errors import PackageIndexError, SourceError, WheelIntegrityError
from release.core.hashing import file_sha256, sha256_hex
from release.core.layout import UPSTREAM_SUBTREE
from release.core.versions import version_of_tag
from release.pristine import safe
from release.pristine.index import IndexFile, note, release_wheel
from release.pristine.lazy_wheel import LazyHTTPFile, RangesRefused, Transfer, download, member_spans
from release.pristine.tree import UpstreamTree, _flashinfer_pin
from release.queue.lines import Line

Want = Callable[[str], bool]
DIST_INFO_RE = re.compile(r"^[^/]+\.dist-info/(METADATA|RECORD)$")
# RECORD may name any hashlib algorithm; PEP 427 forbids the weak ones, and so do we.
RECORD_ALGORITHMS = {"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s"}


def cache_dir() -> Path:
    """Where release wheels are kept between runs (CI may keep it; nothing breaks without it)."""
    configured = os.environ.get("VLLM_FUSED_MOE_CACHE")
    base = (
        Path(configured)
        if configured
        else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vllm-fused-moe"
    )
    return base / "wheels"


def subtree_member(name: str) -> bool:
    """The members of the vendored subtree (no bytecode)."""
    return name.startswith(UPSTREAM_SUBTREE + "/") and not name.endswith("/") and "__pycache__" not in name


@dataclass
class WheelContent:
    """The members of one wheel that a caller wanted, each verified against the wheel's RECORD."""

    wheel: str  # the file name
    wheel_sha256: str  # the index's sha256 of the whole file (or, for a local file, its own)
    names: list[str]  # every file member of the wheel
    files: dict[str, bytes]  # the wanted members, by their path in the wheel
    metadata_raw: bytes | None  # .dist-info/METADATA as stored (verified against RECORD); None: absent
    how: str  # "local wheel", "cached wheel", "cached members", "range requests", "full download"
    transfer: Transfer = field(default_factory=Transfer)

    @property
    def metadata(self) -> str:
        return self.metadata_raw.decode("utf-8", "replace") if self.metadata_raw is not None else ""


# ----------------------------------------------------------------- any archive


def _record(archive: zipfile.ZipFile, label: str) -> tuple[str, bytes, dict[str, tuple[str, str]]]:
    found = [n for n in archive.namelist() if DIST_INFO_RE.match(n) and n.endswith("/RECORD")]
    if len(found) != 1:
        raise WheelIntegrityError(f"{label} has {len(found)} *.dist-info/RECORD files; a wheel has exactly one")
    raw = _read(archive, found[0], label)
    entries: dict[str, tuple[str, str]] = {}
    try:
        for row in csv.reader(io.StringIO(raw.decode("utf-8"))):
            if row:
                entries[row[0]] = (row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else "")
    except (UnicodeDecodeError, csv.Error) as exc:
        raise WheelIntegrityError(f"{label}: {found[0]} is not a valid RECORD ({exc})") from None
    return found[0], raw, entries


def _read(archive: zipfile.ZipFile, name: str, label: str) -> bytes:
    try:
        return archive.read(name)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, KeyError, ValueError) as exc:
        raise WheelIntegrityError(f"{label}: cannot read {name}: {exc}") from None


def verify_member(name: str, data: bytes, record: dict[str, tuple[str, str]], label: str) -> None:
    """`data` is what RECORD says `name` holds (hash and size), or WheelIntegrityError."""
    digest_text, size_text = record.get(name, ("", ""))
    algorithm, _, expected = digest_text.partition("=")
    if not expected:
        raise WheelIntegrityError(f"{label}: {name} has no hash in RECORD, so it cannot be verified")
    if algorithm not in RECORD_ALGORITHMS:
        raise WheelIntegrityError(f"{label}: RECORD hashes {name} with {algorithm!r}, which we do not accept")
    actual = base64.urlsafe_b64encode(hashlib.new(algorithm, data).digest()).rstrip(b"=").decode()
    if actual != expected or (size_text and size_text != str(len(data))):
        raise WheelIntegrityError(
            f"{label}: {name} does not match its RECORD entry ({algorithm} {actual} != {expected}); refused"
        )


def read_archive(archive: zipfile.ZipFile, label: str, want: Want) -> tuple[list[str], dict[str, bytes], bytes | None]:
    """Every member name, the wanted members and METADATA, each checked against RECORD.

    A wanted member that is a link or whose name leaves the subtree is refused before it is read.
    """
    infos = [info for info in archive.infolist() if not info.is_dir()]
    names = [info.filename for info in infos]
    wanted = [info for info in infos if want(info.filename)]
    for info in wanted:
        safe.check_wheel_member(info, label)
    _, _, record = _record(archive, label)
    files = {}
    for info in wanted:
        data = _read(archive, info.filename, label)
        verify_member(info.filename, data, record, label)
        files[info.filename] = data
    return names, files, _metadata(archive, names, record, label)


def _metadata(
    archive: zipfile.ZipFile, names: list[str], record: dict[str, tuple[str, str]], label: str
) -> bytes | None:
    metadata_name = next((n for n in names if DIST_INFO_RE.match(n) and n.endswith("/METADATA")), None)
    if metadata_name is None:
        return None
    raw = _read(archive, metadata_name, label)
    verify_member(metadata_name, raw, record, label)
    return raw


def _open_zip(source: Path | LazyHTTPFile, label: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(source)  # LazyHTTPFile has the file protocol zipfile needs
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise WheelIntegrityError(f"{label} is not a wheel (not a readable zip archive: {exc})") from None


def read_local(path: Path, want: Want, sha256: str = "", how: str = "local wheel") -> WheelContent:
    with _open_zip(path, path.name) as archive:
        names, files, metadata = read_archive(archive, path.name, want)
    return WheelContent(path.name, sha256 or file_sha256(path), names, files, metadata, how)


# ------------------------------------------------------------------- the cache


def _version_dir(version: str) -> Path:
    return cache_dir() / version


def _sidecar(directory: Path, filename: str) -> Path:
    return directory / f"{filename}.index.json"


def _members_cache(directory: Path, filename: str) -> Path:
    return directory / f"{filename}.members.zip"


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        Path(tmp).replace(target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def lookup(version: str) -> IndexFile:
    """The index's entry for `version`'s wheel; offline, the one recorded at the last lookup."""
    directory = _version_dir(version)
    try:
        entry = release_wheel(version)
    except PackageIndexError:
        recorded = sorted(directory.glob("*.whl.index.json")) if directory.is_dir() else []
        if not recorded:
            raise
        entry = IndexFile.from_json(json.loads(recorded[-1].read_text(encoding="utf-8")))
        note(f"the package index cannot be reached; using its entry for {entry.filename} recorded in the cache")
        return entry
    text = json.dumps(entry.to_json(), indent=2, sort_keys=True) + "\n"
    sidecar = _sidecar(directory, entry.filename)
    if not sidecar.is_file() or sidecar.read_text(encoding="utf-8") != text:
        _write_atomically(sidecar, text.encode())
    return entry


def _verified_cached_wheel(path: Path, entry: IndexFile) -> bool:
    """Is the cached whole wheel the index's file? A bad one is deleted, and the user told why."""
    size = path.stat().st_size
    if entry.size is not None and size != entry.size:
        why = f"{size} bytes, the index says {entry.size}: truncated or overwritten"
    else:
        actual = file_sha256(path)
        if actual == entry.sha256:
            return True
        why = f"sha256 {actual[:16]}…, the index says {entry.sha256[:16]}…"
    note(f"cached {path} is corrupt ({why}); deleting it and downloading it again")
    path.unlink()
    return False


def _from_members_cache(path: Path, entry: IndexFile, want: Want) -> WheelContent | None:
    """The wanted members from the cache of an earlier lazy read, or None (absent, incomplete, bad)."""
    label = f"{entry.filename} (cached members)"
    try:
        with zipfile.ZipFile(path) as archive:
            _, raw_record, record = _record(archive, label)
            if archive.comment.decode("ascii", "replace") != sha256_hex(raw_record):
                raise WheelIntegrityError(f"{label}: its RECORD differs from the one read from the index")
            held = set(archive.namelist())
            names = [n for n in record if not n.endswith("/")]
            wanted = [n for n in names if want(n)]
            if not all(n in held for n in wanted):
                return None  # another module set was read last time: fetch the rest
            files = {}
            for name in wanted:
                # Our own cache, but a file on disk all the same: the same member checks as a wheel.
                safe.check_wheel_member(archive.getinfo(name), label)
                data = _read(archive, name, label)
                verify_member(name, data, record, label)
                files[name] = data
            metadata = _metadata(archive, sorted(held), record, label)
    except (WheelIntegrityError, zipfile.BadZipFile, OSError, EOFError) as exc:
        note(f"cached members {path} are unusable ({exc}); reading them from the index again")
        path.unlink(missing_ok=True)
        return None
    return WheelContent(entry.filename, entry.sha256, names, files, metadata, "cached members")


def _store_members(path: Path, content: WheelContent, record: tuple[str, bytes], extra: dict[str, bytes]) -> None:
    """Keep what a lazy read fetched (plus what the cache held) for the next, offline, read."""
    old: dict[str, bytes] = {}
    if path.is_file():
        try:
            with zipfile.ZipFile(path) as archive:
                old = {n: archive.read(n) for n in archive.namelist()}
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error):
            old = {}
    members = {**old, **content.files, **extra, record[0]: record[1]}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for name in sorted(members):
            out.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), members[name], zipfile.ZIP_DEFLATED)
        out.comment = sha256_hex(record[1]).encode()
    _write_atomically(path, buffer.getvalue())


def read_lazily(entry: IndexFile, want: Want) -> tuple[WheelContent, tuple[str, bytes], dict[str, bytes]]:
    """Central directory + wanted members + METADATA + RECORD over range requests (RangesRefused: fall back)."""
    transfer = Transfer()
    remote = LazyHTTPFile(entry.url, entry.size, transfer)
    label = entry.filename
    with _open_zip(remote, label) as archive:
        infos = [info for info in archive.infolist() if not info.is_dir()]
        needed = [info for info in infos if want(info.filename) or DIST_INFO_RE.match(info.filename)]
        remote.prefetch(member_spans(archive, needed))
        record_name, raw_record, _ = _record(archive, label)
        names, files, metadata = read_archive(archive, label, want)
        extra = {n: _read(archive, n, label) for n in names if DIST_INFO_RE.match(n) and n.endswith("/METADATA")}
    content = WheelContent(entry.filename, entry.sha256, names, files, metadata, "range requests", transfer)
    return content, (record_name, raw_record), extra


def pypi_content(version: str, want: Want) -> WheelContent:
    """The wanted members of release `version`'s wheel: from the cache if it is sound, else the index.

    Order: a cached whole wheel (verified against the index's sha256; re-downloaded if bad), the
    members a lazy read cached, a lazy read over range requests, and a full download where the
    server refuses ranges.
    """
    directory = _version_dir(version)
    entry = _index_entry_or_cached(version, directory, "reading it (RECORD is checked)")
    if isinstance(entry, Path):
        return read_local(entry, want, how="cached wheel")
    full = directory / entry.filename
    if full.is_file():
        if _verified_cached_wheel(full, entry):
            return read_local(full, want, entry.sha256, "cached wheel")
        # The user had the whole wheel and it was corrupt (now deleted): give it back whole.
        return _download_and_read(entry, full, want)
    members = _members_cache(directory, entry.filename)
    if members.is_file():
        cached = _from_members_cache(members, entry, want)
        if cached is not None:
            return cached
    try:
        content, record, extra = read_lazily(entry, want)
    except RangesRefused as exc:
        note(f"{exc}: the server does not serve byte ranges; downloading the whole wheel")
        return _download_and_read(entry, full, want)
    _store_members(members, content, record, extra)
    return content


def _index_entry_or_cached(version: str, directory: Path, doing: str) -> IndexFile | Path:
    """The index's file for `version`; offline, a wheel already in the cache (said to be unverified)."""
    try:
        return lookup(version)
    except PackageIndexError:
        legacy = _wheels_for(directory, version)
        if not legacy:
            raise
        note(f"the package index cannot be reached; {legacy[0]} is in the cache, {doing} unverified against it")
        return legacy[0]


def _download_and_read(entry: IndexFile, full: Path, want: Want) -> WheelContent:
    transfer = Transfer()
    note(f"downloading {entry.filename} ({_size_text(entry.size)}) into {full.parent} ...")
    download(entry.url, full, entry.sha256, entry.size, transfer)
    content = read_local(full, want, entry.sha256, "full download")
    content.transfer = transfer
    return content


def _size_text(size: int | None) -> str:
    return f"{size / 1e6:.0f} MB" if size else "size unknown"


# --------------------------------------------------------------- the commands


def pypi_wheel(tag: str) -> Path:
    """The whole release wheel of `tag` in the cache (verified against the index), downloaded if need be."""
    version = version_of_tag(tag)
    directory = _version_dir(version)
    entry = _index_entry_or_cached(version, directory, "using it")
    if isinstance(entry, Path):
        return entry
    full = directory / entry.filename
    if full.is_file() and _verified_cached_wheel(full, entry):
        return full
    note(f"downloading {entry.filename} ({_size_text(entry.size)}) into {directory} ...")
    download(entry.url, full, entry.sha256, entry.size, Transfer())
    return full


def _wheels_for(directory: Path, version: str) -> list[Path]:
    # Release wheels may carry a build tag, e.g. vllm-0.21.0-1-cp38-abi3-....whl.
    pattern = re.compile(rf"^vllm-{re.escape(version)}(-\d+)?-.*\.whl$")
    return sorted(p for p in directory.glob("vllm-*.whl") if pattern.match(p.name)) if directory.is_dir() else []


def _tree(tag: str, content: WheelContent, source_label: str, line: Line | None = None) -> UpstreamTree:
    # Every way of reading (local, cached wheel, cached members, range requests, download) ends
    # here: the wheel must prove it is `tag` by its METADATA (release.pristine.safe).
    safe.prove_wheel_version(content.metadata_raw, tag, content.wheel)
    root = line.root if line else UPSTREAM_SUBTREE
    prefix = root + "/"
    files = {name[len(prefix) :]: data for name, data in content.files.items()}
    if not files:
        raise SourceError(f"{content.wheel} has no {' '.join(line.modules) if line else prefix}")
    return UpstreamTree(
        tag=tag,
        source=source_label,
        files=files,
        flashinfer=_flashinfer_pin(content.metadata),
        wheel=content.wheel,
        wheel_sha256=content.wheel_sha256,
    )


def read_pypi(tag: str, line: Line | None = None) -> UpstreamTree:
    """`--from pypi`: the line's modules (default: the subtree) of `tag`'s release wheel, read lazily or cached."""
    want = line.wants if line else subtree_member
    return _tree(tag, pypi_content(version_of_tag(tag), want), "pypi", line)


def read_wheel(tag: str, wheel: Path, source_label: str, line: Line | None = None) -> UpstreamTree:
    """`--from wheel:PATH`: the line's modules (default: the subtree) of a local wheel file."""
    if not wheel.is_file():
        raise SourceError(f"no wheel at {wheel}")
    return _tree(tag, read_local(wheel, line.wants if line else subtree_member), source_label, line)
