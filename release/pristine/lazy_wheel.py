"""Read a few members of a remote wheel over HTTP range requests; download whole files with progress.

A vLLM wheel is 240-470 MB and a scan needs about 100 KB of it: the zip's central directory,
the members of the vendored modules, METADATA and RECORD. `LazyHTTPFile` is a seekable file
whose bytes are fetched on demand with `Range:` requests and kept, so `zipfile` reads the remote
wheel as if it were local. This is pip's lazy wheel (`pip._internal.network.lazy_wheel`),
not the `remotezip` library: remotezip==0.12.6 issues one request per member and cannot
batch them, which we measured at 11 requests and 1.0 s for one vLLM wheel; here the members
are fetched in merged runs (`prefetch`), 4 requests and about 0.35 s. We also need the byte
count of every request (the scan and its benchmark report it) and to know when a server
ignores `Range` (then we fall back to a full download), which its API does not expose.

A lazy read proves membership, not identity: the members it reads are checked against the
wheel's own RECORD, which the same server sends, so a server may serve a wheel of the same size
with members and RECORD rebuilt to match. Only `scan` and `train check` (which holds every member
to a sha256 recorded earlier from verified bytes) read lazily; what is recorded or vendored comes
from `download`, a whole file whose sha256 must be the index's (release/pristine/wheel.py).

Every request goes through release/pristine/transport.py (timeouts, one deadline for the whole
lazy read, retries); an answer to a range request must be a 206 with exactly the Content-Range
asked and the whole length, or it is a transport failure. A full download shows a `tqdm`
progress bar on stderr.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NoReturn

from tqdm import tqdm

from release.core import log
from release.core.errors import TransportError, WheelIntegrityError
from release.core.journal import write_atomic_from
from release.pristine import transport

TAIL = 64 * 1024  # the first request: the end of the zip, where the central directory ends
MIN_FETCH = 16 * 1024  # an on-demand read fetches at least this much
MERGE_GAP = 256 * 1024  # members closer than this are fetched in one request
CONTENT_RANGE_RE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$", re.ASCII)


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
        # One deadline for the whole lazy read of this wheel, however many requests it takes.
        self.deadline = transport.Deadline(f"reading {url}", transport.settings().deadline)
        self.size = expected_size or 0
        # With the size from the index, ask for an explicit range: some servers honour ranges but
        # not suffix ranges (`bytes=-N`), which would send us needlessly to a full download.
        if expected_size:
            first = max(0, expected_size - TAIL)
            data = self._get(first, expected_size - 1)
        else:
            first, data = self._get_tail()
        self._store(first, data)

    # -- HTTP

    def _get(self, first: int, last: int) -> bytes:
        """Bytes first..last (inclusive) of a file of `self.size` bytes: exactly those, or an error."""
        asked = f"bytes={first}-{last}"
        wanted = f"bytes {first}-{last}/{self.size}"

        def expect(answer: transport.Answer) -> None:
            got = self._check_head(answer, asked)
            if got != wanted:
                # A file of another size than the index says is another file, not a broken link.
                match = CONTENT_RANGE_RE.match(got)
                if match and int(match.group(3)) != self.size and first == max(0, self.size - TAIL):
                    raise WheelIntegrityError(f"{self.url} is {match.group(3)} bytes; the index says {self.size}")
                raise TransportError(f"{self.url}: asked for {asked}, the answer holds {got!r}")

        _, data = transport.get(self.url, f"{self.url} ({asked})", headers={"Range": asked}, expect=expect,
                                limit=last - first + 1, deadline=self.deadline)  # fmt: skip
        self._count(data, last - first + 1, asked)
        return data

    def _get_tail(self) -> tuple[int, bytes]:
        """The last TAIL bytes of a file of unknown size (a suffix range); (where they start, the bytes)."""
        asked = f"bytes=-{TAIL}"
        seen: dict[str, int] = {}

        def expect(answer: transport.Answer) -> None:
            got = self._check_head(answer, asked)
            match = CONTENT_RANGE_RE.match(got)
            total = int(match.group(3)) if match else 0
            if match is None or (int(match.group(1)), int(match.group(2))) != (max(0, total - TAIL), total - 1):
                raise TransportError(f"{self.url}: asked for {asked}, the answer holds {got!r}")
            seen.update(first=int(match.group(1)), total=total)

        _, data = transport.get(self.url, f"{self.url} ({asked})", headers={"Range": asked}, expect=expect,
                                limit=TAIL, deadline=self.deadline)  # fmt: skip
        self.size = seen["total"]
        self._count(data, self.size - seen["first"], asked)
        return seen["first"], data

    def _check_head(self, answer: transport.Answer, asked: str) -> str:
        """The answer's Content-Range, once its status says it is one; RangesRefused where it is the whole file."""
        content_range = answer.headers.get("Content-Range", "")
        if answer.status == 200 or answer.status in (416, 501):
            raise RangesRefused(f"{self.url}: HTTP {answer.status} for {asked}")
        if answer.status != 206:
            raise TransportError(f"{self.url} answered HTTP {answer.status} for {asked}")
        return content_range

    def _count(self, data: bytes, expected: int, asked: str) -> None:
        if len(data) != expected:
            raise TransportError(f"{self.url}: {len(data)} bytes for {asked}, not {expected}")
        self.transfer.requests += 1
        self.transfer.bytes += len(data)

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
            self._store(start, self._get(start, end - 1))

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
            if data is None:  # fetch() checked that it got exactly this range; never trust it blindly
                raise TransportError(f"{self.url}: bytes {self._pos}-{end - 1} did not arrive")
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


def _progress(name: str, size: int | None) -> tqdm[NoReturn]:
    # A bar on a terminal; in a CI log a line every 10 s rather than one per redraw.
    interval = 0.2 if sys.stderr.isatty() else 10.0
    return tqdm(
        total=size,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=name,
        file=sys.stderr,
        mininterval=interval,
        disable=log.quiet(),
    )


class _Received:
    """The sha256 and length of what a download got so far."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.digest = hashlib.sha256()
        self.bytes = 0

    def add(self, block: bytes) -> None:
        self.digest.update(block)
        self.bytes += len(block)


def download(url: str, target: Path, sha256: str, size: int | None, transfer: Transfer) -> None:
    """The whole file into `target` (atomically), kept only if its sha256 is the index's."""
    target.parent.mkdir(parents=True, exist_ok=True)
    received = _Received()

    def expect(answer: transport.Answer) -> None:
        if answer.status != 200:
            raise TransportError(f"{url} answered HTTP {answer.status}")
        length = answer.headers.get("Content-Length", "")
        if size is not None and length.isdigit() and int(length) != size:
            raise WheelIntegrityError(f"{url} is {length} bytes; the index says {size}; it was not kept")

    def fill(out: BinaryIO) -> None:
        with _progress(target.name, size) as bar:

            def sink(block: bytes) -> None:
                out.write(block)
                received.add(block)
                bar.update(len(block))

            def restart() -> None:
                # The body broke off: the next attempt starts the file again.
                out.seek(0)
                out.truncate()
                received.reset()
                bar.reset(total=size)

            transport.get(url, f"the download of {url}", expect=expect, sink=sink, restart=restart, limit=size)
            transfer.requests += 1
            transfer.bytes += received.bytes
        actual = received.digest.hexdigest()
        if actual != sha256:  # raised inside the writer: the temporary goes, nothing is renamed into place
            raise WheelIntegrityError(
                f"{url} downloaded with sha256 {actual}, but the index says {sha256}; it was not kept"
            )

    write_atomic_from(target, fill)
