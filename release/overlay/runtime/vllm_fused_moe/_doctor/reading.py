"""What the doctor reads from outside and prints back: bounded reads of a file or a URL, and safe words for them.

A file (the scan data, a `file://` index) is read only as a regular file, opened without blocking, so a
FIFO is refused at once and /dev/zero by its kind. A URL is read under one deadline for the whole
answer (connect, headers and body), not per read: a server that trickles a byte every second is cut
off when the deadline passes, by shutting its socket from a timer. Whatever came from an index, a
URL or a file is printed through `shown` (credentials out, control characters escaped), so it can
neither hide a secret in a report nor move the cursor and print a line of its own.

The tooling (release/core/files.py, release/core/text.py) has the same rules; this package ships in
the wheel without `release/`, so it restates them, standard library only, Python 3.10+.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import http.client
import os
import re
import socket
import stat
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

# release/core/text.py's CONTROL_RE: C0 (tab and LF too), DEL, C1, and the Unicode line and paragraph separators.
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
SCHEMES = ("file", "http", "https")
REDACTED = "****"


class ReadFailed(Exception):
    """A read that did not give the bytes asked for: its message says why (never a credential)."""


def escaped(text: str) -> str:
    """`text` with each control character written as its escape (`\\x1b`, `\\r`, `\\u2028`): printed, it is inert."""

    def escape(found: re.Match[str]) -> str:
        char = found.group()
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or (
            f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
        )

    return CONTROL_RE.sub(escape, text)


def redacted(url: str) -> str:
    """`url` without the credentials of its authority (`https://tok:s3cr3t@host/` -> `https://****@host/`).

    Textual, so that a URL that does not parse (a port that is no number, a newline) is redacted too."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    end = min(ends) if ends else len(rest)
    authority = rest[:end]
    if "@" in authority:
        authority = f"{REDACTED}@{authority.rpartition('@')[2]}"
    return f"{scheme}{sep}{authority}{rest[end:]}"


def shown(url: str) -> str:
    """A URL as the doctor prints it: without credentials, its control characters escaped."""
    return escaped(redacted(url))


def url_problem(url: str) -> str | None:
    """Why `url` cannot be an index URL the doctor reads, or None."""
    if CONTROL_RE.search(url) or " " in url:
        return "it holds a space or a control character (a newline?)"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError where the port is no number (`tok:s3cr3t@host` without a scheme's //)
    except ValueError as exc:
        return f"it does not parse as a URL ({exc})"
    if parts.scheme not in SCHEMES:
        return "it is not a file://, http:// or https:// URL"
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            return "a file:// URL names a host; only file:///PATH is read"
        return None
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "its port is 0"
    return None


# ----------------------------------------------------------------------------- files


def read_file(path: Path, limit: int) -> bytes:
    """`path`'s bytes if it is a regular file of at most `limit` bytes, else OSError.

    Opened with O_NONBLOCK (a FIFO opens at once, unread), proven a regular file by fstat of that very
    descriptor, and read to at most `limit` + 1 bytes (a file that grows is cut off)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a directory)")
        if status.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than the {limit} bytes it may have")
        os.set_blocking(fd, True)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than the {limit} bytes it may have")
    return data


# ----------------------------------------------------------------------------- URLs


class _Sockets:
    """The sockets of one read, so that the deadline's timer can shut them (a blocked recv then returns)."""

    def __init__(self) -> None:
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        self.expired = False

    def add(self, sock: Any) -> None:
        with self.lock:
            self.open.append(sock)
            if self.expired:
                self._shut(sock)

    def expire(self) -> None:
        with self.lock:
            self.expired = True
            for sock in self.open:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the plain socket's shutdown, also under TLS: it wakes a blocked recv
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _opener(sockets: _Sockets) -> urllib.request.OpenerDirector:
    """urllib's opener (redirects, proxies) whose HTTP(S) connections record their sockets in `sockets`."""

    class Plain(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            sockets.add(self.sock)

    class Secure(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            sockets.add(self.sock)

    class PlainHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Plain, req)

    class SecureHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Secure, req)

    return urllib.request.build_opener(PlainHandler, SecureHandler)


def _request(url: str) -> urllib.request.Request:
    """The request of `url`, its credentials (if any) sent as HTTP basic auth, never in the URL http.client sees."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return urllib.request.Request(url)
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=host)))
    request.add_header("Authorization", "Basic " + base64.b64encode(token.encode("utf-8")).decode("ascii"))
    return request


def read_url(url: str, limit: int, seconds: float) -> bytes:
    """At most `limit` bytes of `url` (file://, http://, https://), all of them within `seconds`; else ReadFailed."""
    problem = url_problem(url)
    if problem:
        raise ReadFailed(problem)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        try:
            data = read_file(Path(urllib.request.url2pathname(parts.path)), limit)
        except OSError as exc:
            raise ReadFailed(f"not read: {exc.strerror or exc}") from None
        return data
    sockets = _Sockets()
    timer = threading.Timer(seconds, sockets.expire)
    timer.daemon = True
    timer.start()
    late = ReadFailed(f"not read within {seconds:g} s (the whole answer has that long)")
    try:
        data = _read_http(_opener(sockets), _request(url), limit, seconds)
    except ReadFailed:
        raise
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if sockets.expired:
            raise late from None
        reason = getattr(exc, "reason", None) or exc
        if isinstance(exc, urllib.error.HTTPError):
            reason = f"HTTP {exc.code} {exc.reason}"
        raise ReadFailed(f"not read: {escaped(redacted(str(reason)))}") from None
    finally:
        timer.cancel()
        timer.join()
    if sockets.expired:  # a socket shut by the timer reads as the end of the answer: it is not one
        raise late
    return data


def _read_http(
    opener: urllib.request.OpenerDirector, request: urllib.request.Request, limit: int, seconds: float
) -> bytes:
    chunks: list[bytes] = []
    total = 0
    with opener.open(request, timeout=seconds) as answer:
        while True:
            chunk = answer.read1(1 << 16)  # what one recv gave: the deadline is checked between them
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise ReadFailed(f"larger than the {limit} bytes it may have")
            chunks.append(chunk)
    return b"".join(chunks)
