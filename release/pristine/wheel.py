"""Read vLLM's modules out of a release wheel: a local file, the cache, or the index.

Two ways of reading, for two kinds of use (docs/guarantees.md, "The package index and its mirrors"):
- identity (`read_pypi`, the default of `fetch`: what `rebase` and `train add` vendor and record): the
  whole wheel, whose sha256 is computed on the very bytes the members are read from and must be the
  index's. Downloaded once into the cache, and hashed again at every use, so a cached file that was
  swapped or damaged is caught (reported, deleted, downloaded again). A same-size wheel with rebuilt
  members and RECORD has another sha256, and is refused (exit 2) before anything is vendored.
- membership (`pypi_content`, `read_pypi(..., lazy=True)`: `scan` and `train check`): HTTP range
  requests for the central directory and the wanted members, each checked against the wheel's own
  RECORD (and zip's CRC-32). That proves the bytes are members of a wheel whose RECORD says so, not
  that the wheel is the index's file: the `wheel_sha256` it reports is the index's claim. `train check`
  holds every member to the sha256 recorded when the tag was added from verified bytes; the scan says
  in its output that it proves membership, not identity. A lazy read through `fetch` (`member_content`:
  `train check`, `build --all`, `pq carry`) takes the members of a whole wheel already cached the same way,
  against RECORD, without hashing the whole file.

Either way, every member we use (the modules, METADATA) is checked against the sha256 the wheel's
RECORD lists for it; a member missing from RECORD is refused.

The cache, per release, under $VLLM_FUSED_MOE_CACHE/wheels/<version>/ (default
~/.cache/vllm-fused-moe/wheels/): the whole wheel where one was downloaded; `<wheel>.index.json`,
the index's entry for it, so a later run verifies the cache without the network; and
`<wheel>.members.zip`, the members a lazy read fetched (with RECORD and METADATA), so a
second lazy read of the same modules is offline. Every file name there is a name from the index,
checked by `checked_name` (release/pristine/index.py) before it is joined to a path.

Longer than 500 lines on purpose: both ways of reading share the cache, the name checks and the RECORD
check, and one module keeps the line between identity and membership in one place.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import BinaryIO

from release.core import log
from release.core.errors import BadInputError, SourceError, TransportError, WheelIntegrityError
from release.core.files import WHEEL_LIMIT, open_regular, read_member
from release.core.hashing import sha256_hex
from release.core.journal import write_atomic, write_atomic_from
from release.core.layout import UPSTREAM_SUBTREE
from release.core.parse import load_json
from release.core.versions import version_of_tag
from release.model.lines import Line
from release.model.tree import UpstreamTree
from release.pristine import safe
from release.pristine.index import IndexFile, checked_name, release_wheel
from release.pristine.lazy_wheel import LazyHTTPFile, RangesRefused, Transfer, download, member_spans

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
    # The sha256 of the whole file: computed on the bytes read (`verified`), or the index's claim (lazy).
    wheel_sha256: str
    names: list[str]  # every file member of the wheel
    files: dict[str, bytes]  # the wanted members, by their path in the wheel
    metadata_raw: bytes | None  # .dist-info/METADATA as stored (verified against RECORD); None: absent
    how: str  # "local wheel", "cached wheel", CACHED_MEMBERS, "cached members", "range requests", "full download"
    transfer: Transfer = field(default_factory=Transfer)

    @property
    def verified(self) -> bool:
        """Was `wheel_sha256` computed on the whole file these members were read from?"""
        return self.how in VERIFIED_HOWS


VERIFIED_HOWS = ("local wheel", "cached wheel", "full download")
# A cached whole wheel read for membership (member_content): its members against RECORD, the file not hashed whole.
CACHED_MEMBERS = "cached wheel, members against RECORD"


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
        return read_member(archive, name, error=WheelIntegrityError, what=f"{label}: ")
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

    A member with an unsafe name (absolute, `..`), read or not, and a wanted member that is a link
    are refused before anything is read.
    """
    infos = [info for info in archive.infolist() if not info.is_dir()]
    names = [info.filename for info in infos]
    safe.check_wheel_names(names, label)
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


def _open_zip(source: Path | BinaryIO | LazyHTTPFile, label: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(source)  # LazyHTTPFile has the file protocol zipfile needs
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise WheelIntegrityError(f"{label} is not a wheel (not a readable zip archive: {exc})") from None


def read_local(
    path: Path, want: Want, how: str = "local wheel", *, keep: bool = False, expect: str = ""
) -> WheelContent:
    """The wanted members of a wheel file, and the sha256 of exactly the bytes they were read from.

    A regular file of at most WHEEL_LIMIT bytes (release.core.files); `keep`: also kept in the cache;
    `expect`: the sha256 it must have, checked before a member is read (else WheelIntegrityError).
    """
    if not path.is_file() and not os.path.lexists(path):
        raise SourceError(f"no wheel at {path}")
    with open_regular(path, WHEEL_LIMIT, error=SourceError, what="wheel: ") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
        if expect and digest != expect:
            raise WheelIntegrityError(f"{path} has sha256 {digest[:16]}…, not {expect[:16]}…")
        content = read_handle(handle, path.name, digest, want, how)
        if keep and not path.resolve().is_relative_to(cache_dir().resolve()):  # there already: found by name
            _keep(handle, path.name, digest)
        return content


def read_handle(handle: BinaryIO, filename: str, sha256: str, want: Want, how: str) -> WheelContent:
    """Read from an open file whose sha256 was computed on it: a swap of the path afterwards changes nothing."""
    handle.seek(0)
    with _open_zip(handle, filename) as archive:
        names, files, metadata = read_archive(archive, filename, want)
    return WheelContent(filename, sha256, names, files, metadata, how)


# ------------------------------------------------------------------- the cache


def _version_dir(version: str) -> Path:
    return cache_dir() / version


def _cached(directory: Path, filename: str, suffix: str = "") -> Path:
    """A path in the cache for a file the index named: only ever a checked base name."""
    return directory / (checked_name(filename) + suffix)


def _sidecar(directory: Path, filename: str) -> Path:
    return _cached(directory, filename, ".index.json")


def _members_cache(directory: Path, filename: str) -> Path:
    return _cached(directory, filename, ".members.zip")


def lookup(version: str) -> IndexFile:
    """The index's entry for `version`'s wheel; offline, the one recorded at the last lookup."""
    directory = _version_dir(version)
    try:
        entry = release_wheel(version)
    except TransportError:
        recorded = sorted(directory.glob("*.whl.index.json")) if directory.is_dir() else []
        if not recorded:
            raise
        where = f"the cached index entry {recorded[-1]}"
        try:
            data = load_json(recorded[-1])
        except BadInputError:
            raise TransportError(f"the package index cannot be reached, and {where} is not JSON") from None
        entry = IndexFile.from_json(data, where)
        checked_name(entry.filename, version, where)
        log.note(f"the package index cannot be reached; using its entry for {entry.filename} recorded in the cache")
        return entry
    text = json.dumps(entry.to_json(), indent=2, sort_keys=True) + "\n"
    sidecar = _sidecar(directory, entry.filename)
    if not sidecar.is_file() or sidecar.read_text(encoding="utf-8") != text:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(sidecar, text.encode())
    return entry


def _open_verified(path: Path, entry: IndexFile) -> BinaryIO | None:
    """The cached whole wheel, open, once its bytes hash to the index's sha256; a bad one is deleted, and said so.

    The hash is computed on the open file that is then read, so the bytes used are the bytes checked.
    """
    handle = path.open("rb")
    size = os.fstat(handle.fileno()).st_size
    if entry.size is not None and size != entry.size:
        why = f"{size} bytes, the index says {entry.size}: truncated or overwritten"
    else:
        actual = hashlib.file_digest(handle, "sha256").hexdigest()
        if actual == entry.sha256:
            return handle
        why = f"sha256 {actual[:16]}…, the index says {entry.sha256[:16]}…"
    handle.close()
    log.warn(f"cached {path} is corrupt ({why}); deleting it and downloading it again")
    path.unlink()
    return None


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
        log.note(f"cached members {path} are unusable ({exc}); reading them from the index again")
        path.unlink(missing_ok=True)
        return None
    return WheelContent(entry.filename, entry.sha256, names, files, metadata, "cached members")


def _store_members(path: Path, content: WheelContent, record: tuple[str, bytes], extra: dict[str, bytes]) -> None:
    """Keep what a lazy read fetched (plus what the cache held) for the next, offline, read."""
    old: dict[str, bytes] = {}
    if path.is_file():
        try:
            with zipfile.ZipFile(path) as archive:
                old = {n: read_member(archive, n) for n in archive.namelist()}
        except (BadInputError, zipfile.BadZipFile, OSError, EOFError, zlib.error):
            old = {}
    members = {**old, **content.files, **extra, record[0]: record[1]}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for name in sorted(members):
            out.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), members[name], zipfile.ZIP_DEFLATED)
        out.comment = sha256_hex(record[1]).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())


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
    """The wanted members of release `version`'s wheel, read for membership (lazily where it can be).

    Order: a cached whole wheel (verified against the index's sha256; re-downloaded if bad), the
    members a lazy read cached, a lazy read over range requests, and a full download where the
    server refuses ranges. Only the first and the last are `verified`: a lazy read proves that the
    members belong to a wheel whose RECORD lists them, not that the wheel is the index's file.
    """
    entry = lookup(version)
    directory = _version_dir(version)
    full = _cached(directory, entry.filename)
    if full.is_file():
        return _whole(entry, full, want)
    members = _members_cache(directory, entry.filename)
    if members.is_file():
        cached = _from_members_cache(members, entry, want)
        if cached is not None:
            return cached
    try:
        content, record, extra = read_lazily(entry, want)
    except RangesRefused as exc:
        log.note(f"{exc}: the server does not serve byte ranges; downloading the whole wheel")
        return _whole(entry, full, want)
    _store_members(members, content, record, extra)
    return content


def member_content(version: str, want: Want) -> WheelContent:
    """The wanted members for membership alone (`fetch(..., lazy=True)`: `train check`, `build --all`, `pq carry`).

    From a whole wheel already in the cache of the index's size: each wanted member (and METADATA) against
    the wheel's RECORD, as a read by range requests proves them, without hashing the whole file (about
    0.2 s of CPU a release wheel, each time): every caller holds each member to the sha256 patches/train.toml
    recorded from verified bytes. Not `verified`: the sha256 is the index's claim, as for a range read. A
    cached wheel whose members do not match its RECORD goes the way of `pypi_content`: hashed whole, and
    deleted and downloaded again when bad. Without a cached whole wheel, `pypi_content`.
    """
    entry = lookup(version)
    full = _cached(_version_dir(version), entry.filename)
    if full.is_file():
        try:
            with full.open("rb") as handle:
                if entry.size is None or os.fstat(handle.fileno()).st_size == entry.size:
                    return read_handle(handle, entry.filename, entry.sha256, want, CACHED_MEMBERS)
        except (WheelIntegrityError, OSError):
            pass  # hashed whole below: a damaged cache is said, dropped and read again
    return pypi_content(version, want)


def verified_content(version: str, want: Want) -> WheelContent:
    """The wanted members of release `version`'s wheel, read from the whole file whose sha256 is the index's."""
    entry = lookup(version)
    return _whole(entry, _cached(_version_dir(version), entry.filename), want)


def _whole(entry: IndexFile, full: Path, want: Want) -> WheelContent:
    """The members from the whole wheel in the cache (downloaded first where it is absent or bad)."""
    transfer = Transfer()
    handle = _open_verified(full, entry) if full.is_file() else None
    how = "cached wheel"
    if handle is None:
        log.note(f"downloading {entry.filename} ({_size_text(entry.size)}) into {full.parent} ...")
        download(entry.url, full, entry.sha256, entry.size, transfer)
        handle = _open_verified(full, entry)
        how = "full download"
        if handle is None:  # replaced between the download and the read: say so, do not loop
            raise WheelIntegrityError(f"{full} changed after it was downloaded and verified; nothing was used")
    with handle:
        content = read_handle(handle, entry.filename, entry.sha256, want, how)
    content.transfer = transfer
    return content


def _size_text(size: int | None) -> str:
    return f"{size / 1e6:.0f} MB" if size else "size unknown"


# --------------------------------------------------------------- the commands


def pypi_wheel(tag: str) -> Path:
    """The whole release wheel of `tag` in the cache (verified against the index), downloaded if need be."""
    version = version_of_tag(tag)
    entry = lookup(version)
    full = _cached(_version_dir(version), entry.filename)
    handle = _open_verified(full, entry) if full.is_file() else None
    if handle is not None:
        handle.close()
        return full
    log.note(f"downloading {entry.filename} ({_size_text(entry.size)}) into {full.parent} ...")
    download(entry.url, full, entry.sha256, entry.size, Transfer())
    return full


def _tree(tag: str, content: WheelContent, source_label: str, line: Line | None = None) -> UpstreamTree:
    # Every way of reading (local, cached wheel, cached members, range requests, download) ends
    # here: the wheel must prove it is `tag` by its METADATA (release.pristine.safe).
    metadata = safe.prove_wheel_version(content.metadata_raw, tag, content.wheel)
    root = line.root if line else UPSTREAM_SUBTREE
    prefix = root + "/"
    files = {name[len(prefix) :]: data for name, data in content.files.items()}
    if not files:
        raise SourceError(f"{content.wheel} has no {' '.join(line.modules) if line else prefix}")
    return UpstreamTree(
        tag=tag,
        source=source_label,
        files=files,
        flashinfer=safe.wheel_flashinfer_pin(metadata, content.wheel),
        wheel=content.wheel,
        wheel_sha256=content.wheel_sha256,
        wheel_verified=content.verified,
    )


def read_pypi(tag: str, line: Line | None = None, lazy: bool = False) -> UpstreamTree:
    """`--from pypi`: the line's modules (default: the subtree) of `tag`'s release wheel.

    By default from the whole wheel, verified against the index's sha256 (what may be recorded and
    vendored); `lazy` reads for membership only (`member_content`: a cached whole wheel's members against
    its RECORD, the cache of an earlier range read, or range requests), for `train check`.
    """
    want = line.wants if line else subtree_member
    read = member_content if lazy else verified_content
    return _tree(tag, read(version_of_tag(tag), want), "pypi", line)


def read_wheel(
    tag: str, wheel: Path, line: Line | None = None, *, sha256: str = "", lazy: bool = False
) -> UpstreamTree:
    """`--from wheel:PATH`: the line's modules (default: the subtree) of a local wheel file.

    Recorded as `wheel:NAME` with the file's own sha256, never the directory it lay in (a committed
    file must not name a path of one machine); so a wheel read for recording (not `lazy`) is kept in
    the wheel cache by that sha256, the very bytes verified. A bare NAME (what the train records) is
    read where it is given if it is there, else found by `recorded_wheel`.
    """
    want = line.wants if line else subtree_member
    if wheel.name == str(wheel) and not os.path.lexists(wheel):
        content = recorded_wheel(version_of_tag(tag), wheel.name, sha256, want, lazy)
    else:
        content = read_local(wheel, want, keep=not lazy)
    return _tree(tag, content, f"wheel:{content.wheel}", line)


def kept_dir() -> Path:
    """Where the wheels `wheel:PATH` read for recording are kept: by-sha256/<sha256>/<name>."""
    return cache_dir() / "by-sha256"


def _keep(handle: BinaryIO, name: str, sha256: str) -> None:
    """Copy the open wheel, whose sha256 is `sha256`, into the cache (once): the bytes copied are hashed again."""
    target = kept_dir() / sha256 / name  # a base name: the file's own, as the train records it
    if target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)

    def fill(out: BinaryIO) -> None:
        handle.seek(0)
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
            out.write(block)
        if digest.hexdigest() != sha256:
            raise WheelIntegrityError(f"{name} changed while it was read; nothing was used")

    write_atomic_from(target, fill)


def recorded_wheel(version: str, name: str, sha256: str, want: Want, lazy: bool) -> WheelContent:
    """The wheel a train entry (or the pin) records as `wheel:NAME` with `sha256`, wherever this machine has it.

    In order: the wheel cache, by sha256 (kept there when it was recorded; any kept NAME when no sha256
    is given), each copy hashed again as it is read; the release wheels `--from pypi` keeps, by NAME;
    and the package index, where NAME and `sha256` are its release file for `version`: downloaded (or,
    `lazy`, read by range requests) and verified as `--from pypi` is. What is read is held to `sha256`.
    """
    kept = [kept_dir() / sha256 / name] if sha256 else sorted(kept_dir().glob(f"*/{glob_escape(name)}"))
    for path in kept:
        if path.is_file():
            try:
                return read_local(path, want, "cached wheel", expect=path.parent.name)
            except WheelIntegrityError as exc:
                log.warn(f"cached {path} is corrupt ({exc}); deleting it")
                path.unlink()
    release = _version_dir(version) / name
    if release.is_file():  # `train check` holds what it finds to the recorded sha256
        return read_local(release, want, "cached wheel")
    looked = f"no wheel at {name} (nor in the wheel cache {cache_dir()})"
    if not sha256:
        raise SourceError(looked)
    entry = lookup(version)
    if entry.filename != name or entry.sha256 != sha256:
        raise SourceError(
            f"{looked}, and it is not vLLM {version}'s release file on the package index "
            f"({entry.filename}, sha256 {entry.sha256[:16]}…)",
            hint=f"read it once on this machine: `--from wheel:PATH/{name}` keeps it in the wheel cache",
        )
    return (pypi_content if lazy else verified_content)(version, want)
