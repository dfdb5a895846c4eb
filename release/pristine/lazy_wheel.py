"""Read a few members of a remote wheel over HTTP range requests; download whole files with progress.

A vLLM wheel is 240-470 MB and we need about 100 KB of it: the zip's central directory, the
members of the vendored modules, METADATA and RECORD. `LazyHTTPFile` is a seekable file whose
bytes are fetched on demand with `Range:` requests and kept, so `zipfile` reads the remote
wheel as if it were local. This is pip's lazy wheel (`pip._internal.network.lazy_wheel`),
not the `remotezip` library: remotezip==0.12.6 issues one request per member and cannot
batch them, which we measured at 11 requests and 1.0 s for one vLLM wheel; here the members
are fetched in merged runs (`prefetch`), 4 requests and about 0.35 s. We also need the byte
count of every request (the scan and its benchmark report it) and to know when a server
ignores `Range` (then we fall back to a full download), which its API does not expose.

HTTP is `requests` (pinned in pyproject.toml): one keep-alive session, so a wheel's few
requests share one TLS connection. A full download shows a `tqdm` progress bar on stderr.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import requests
from tqdm import tqdm

from release.core.errors import PackageIndexError, WheelIntegrityError
from release.pristine.index import TIMEOUT, session

TAIL = 64 * 1024  # the first request: the end of the zip, where the central directory ends
MIN_FETCH = 16 * 1024  # an on-demand read fetches at least this much
MERGE_GAP = 256 * 1024  # members closer than this are fetched in one request
CONTENT_RANGE_RE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


class RangesRefused(Exception):
    """The server answered a range request with the whole file (or not at all): fall back."""


@dataclass
class Transfer:
    """What went over the wire for one wheel: requests and body bytes."""

    requests: int = 0
    bytes: int = 0

    def add(self, other: Transfer) -> None:
        self.requests += other.requests
        self.bytes += other.bytes


class LazyHTTPFile:
    """A read-only, seekable view of a remote file; only the ranges read are downloaded."""

    def __init__(self, url: str, expected_size: int | None, transfer: Transfer) -> None:
        self.url = url
        self.transfer = transfer
        self._chunks: list[tuple[int, bytes]] = []  # sorted, non-overlapping (start, data)
        self._pos = 0
        # With the size from the index, ask for an explicit range: some servers honour ranges but
        # not suffix ranges (`bytes=-N`), which would send us needlessly to a full download.
        tail = f"bytes={max(0, expected_size - TAIL)}-{expected_size - 1}" if expected_size else f"bytes=-{TAIL}"
        start, data, total = self._get(tail)
        if expected_size is not None and total != expected_size:
            raise WheelIntegrityError(f"{url} is {total} bytes; the index says {expected_size}")
        self.size = total
        self._store(start, data)

    # -- HTTP

    def _get(self, byte_range: str) -> tuple[int, bytes, int]:
        headers = {"Range": byte_range, "Accept-Encoding": "identity"}
        try:
            response = session().get(self.url, headers=headers, timeout=TIMEOUT, stream=True)
        except requests.RequestException as exc:
            raise PackageIndexError(f"cannot read {self.url}: {type(exc).__name__}") from None
        with response:
            content_range = response.headers.get("Content-Range", "")
            match = CONTENT_RANGE_RE.match(content_range)
            if response.status_code == 200 or (response.status_code == 206 and not match):
                raise RangesRefused(f"{self.url}: HTTP {response.status_code} without a byte range")
            if response.status_code in (416, 501):
                raise RangesRefused(f"{self.url}: HTTP {response.status_code} for {byte_range}")
            if response.status_code != 206 or match is None:
                raise PackageIndexError(f"{self.url} answered HTTP {response.status_code} for {byte_range}")
            data = response.raw.read(decode_content=False)
        first, last, total_text = match.groups()
        self.transfer.requests += 1
        self.transfer.bytes += len(data)
        if len(data) != int(last) - int(first) + 1 or total_text == "*":
            raise PackageIndexError(f"{self.url}: short or unsized answer to {byte_range} ({content_range})")
        return int(first), data, int(total_text)

    def _store(self, start: int, data: bytes) -> None:
        """Keep `data` at `start`, merging it with every chunk it touches."""
        end = start + len(data)
        kept: list[tuple[int, bytes]] = []
        for c_start, c_data in self._chunks:
            c_end = c_start + len(c_data)
            if c_end < start or c_start > end:
                kept.append((c_start, c_data))
                continue
            # Overlapping or adjacent: splice the old bytes around the new ones.
            if c_start < start:
                data = c_data[: start - c_start] + data
                start = c_start
            if c_end > end:
                data = data + c_data[end - c_start :]
                end = c_end
        kept.append((start, data))
        self._chunks = sorted(kept)

    def _covered(self, start: int, end: int) -> bytes | None:
        for c_start, c_data in self._chunks:
            if c_start <= start and end <= c_start + len(c_data):
                return c_data[start - c_start : end - c_start]
        return None

    def fetch(self, start: int, end: int) -> None:
        """Make [start, end) local, in one request for what is missing of it."""
        start, end = max(0, start), min(self.size, end)
        if start >= end or self._covered(start, end) is not None:
            return
        # Fetch only the part not already held at either end.
        for c_start, c_data in self._chunks:
            c_end = c_start + len(c_data)
            if c_start <= start < c_end:
                start = c_end
            if c_start < end <= c_end:
                end = c_start
        if start < end:
            got_start, data, _ = self._get(f"bytes={start}-{end - 1}")
            self._store(got_start, data)

    def prefetch(self, spans: list[tuple[int, int]]) -> None:
        """Fetch the spans, merged where they are close, so a wheel takes a few requests."""
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if merged and start - merged[-1][1] <= MERGE_GAP:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        for start, end in merged:
            self.fetch(start, end)

    # -- the file protocol zipfile uses

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self._pos + size)
        if self._pos >= end:
            return b""
        data = self._covered(self._pos, end)
        if data is None:
            self.fetch(self._pos, max(end, self._pos + MIN_FETCH))
            data = self._covered(self._pos, end)
            assert data is not None  # fetch() made exactly this range local
        self._pos = end
        return data

    def close(self) -> None:
        self._chunks = []


def member_spans(archive: zipfile.ZipFile, members: list[zipfile.ZipInfo]) -> list[tuple[int, int]]:
    """Where each member lives in the file: from its local header to the next member's."""
    offsets = sorted({info.header_offset for info in archive.infolist()} | {archive.start_dir})
    spans = []
    for info in members:
        following = next((o for o in offsets if o > info.header_offset), archive.start_dir)
        spans.append((info.header_offset, following))
    return spans


# ------------------------------------------------------------------ downloads


def download(url: str, target: Path, sha256: str, size: int | None, transfer: Transfer) -> None:
    """The whole file into `target` (atomically), verified against the index's sha256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=".download-", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                response = session().get(url, headers={"Accept-Encoding": "identity"}, timeout=TIMEOUT, stream=True)
            except requests.RequestException as exc:
                raise PackageIndexError(f"cannot download {url}: {type(exc).__name__}") from None
            with response:
                if response.status_code != 200:
                    raise PackageIndexError(f"{url} answered HTTP {response.status_code}")
                total = size or int(response.headers.get("Content-Length", 0)) or None
                transfer.requests += 1
                # A bar on a terminal; in a CI log a line every 10 s rather than one per redraw.
                with tqdm(
                    total=total,
                    unit="B",
                    unit_scale=True,
                    unit_divisor=1024,
                    desc=target.name,
                    file=sys.stderr,
                    mininterval=0.2 if sys.stderr.isatty() else 10.0,
                    leave=True,
                ) as bar:
                    try:
                        for block in response.iter_content(chunk_size=1 << 20):
                            out.write(block)
                            digest.update(block)
                            transfer.bytes += len(block)
                            bar.update(len(block))
                    except requests.RequestException as exc:
                        raise PackageIndexError(f"download of {url} broke off: {type(exc).__name__}") from None
        if digest.hexdigest() != sha256:
            raise WheelIntegrityError(
                f"{url} downloaded with sha256 {digest.hexdigest()}, but the index says {sha256}; it was not kept"
            )
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
