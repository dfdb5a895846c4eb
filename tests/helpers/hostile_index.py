"""A hostile package index on 127.0.0.1: a real HTTP server that lies, breaks off, stalls and drips.

Not a double of our code: a plain `http.server` serving a PEP 691 (or PEP 503) project page and
real wheel files, which misbehaves exactly as it is told (`Fault`), so the tests see what the
tool does against an index, a mirror or a file host that cannot be trusted. Beside
tests/helpers/index_server.py (the well-behaved index) and independent of it.

What it can do:
- list any `filename` (a traversal name, say) with any sha256 and size, for any served file;
- serve a page body given raw (`page_body`), e.g. JSON whose `files` entries have the wrong types;
- apply a fault to the page or to the files, for the first `times` requests (then behave), or always:
  `status` (e.g. 503, or 429 with `retry_after`), `cut` (a 206 or 200 whose body stops halfway and the
  connection closes), `wrong-range` (a 206 for other bytes than asked), `stall` (the head, then
  nothing) and `drip` (the head, then one byte every `interval` seconds).
It records every request (path, Range, status, when), so a test asserts retries and timings.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

from release.core.hashing import file_sha256

RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Listed:
    """One file as the page lists it: the name, sha256 and size the index claims, and the bytes it serves."""

    path: Path  # what is served at /files/<n>
    filename: str = ""  # what the page calls it (default: the file's own name)
    sha256: str = ""  # what the page claims (default: the file's own)
    size: int | None = -1  # what the page claims (default: the file's own; None: not said)

    def __post_init__(self) -> None:
        self.filename = self.filename or self.path.name
        self.sha256 = self.sha256 or file_sha256(self.path)
        if self.size == -1:
            self.size = self.path.stat().st_size


@dataclass
class Fault:
    """How to misbehave: on "page" or "file" requests, for the first `times` of them (None: always)."""

    kind: str  # "status", "cut", "wrong-range", "stall", "drip"
    target: str = "file"
    times: int | None = None
    status: int = 503
    retry_after: str | None = None
    interval: float = 0.2  # seconds between dripped bytes


@dataclass
class Request:
    path: str
    range: str
    status: int
    at: float  # time.monotonic()


@dataclass
class Log:
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, target: str) -> list[Request]:
        prefix = "/files/" if target == "file" else "/simple/"
        with self.lock:
            return [r for r in self.requests if r.path.startswith(prefix)]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True  # a stalled handler must not keep the test process alive

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up (its timeout, its deadline) resets the connection: expected here


class HostileIndex:
    def __init__(
        self,
        files: list[Listed],
        page: str = "json",
        page_body: tuple[str, bytes] | None = None,
        faults: list[Fault] | None = None,
    ) -> None:
        self.files = files
        self.page = page
        self.page_body = page_body  # (Content-Type, body) served as the project page, as given
        self.faults = faults or []
        self.log = Log()
        self.closing = threading.Event()
        self._counts: dict[str, int] = {"page": 0, "file": 0}
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as PyPI's CDN; a fault closes the connection

            def log_message(self, format: str, *args: object) -> None:  # quiet test output
                pass

            def do_GET(self) -> None:
                try:
                    index.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client hung up: what a timeout on its side does

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/simple/"

    def __enter__(self) -> HostileIndex:
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.closing.set()  # ends every stall and drip
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ serving

    def fault_for(self, target: str) -> Fault | None:
        with self.log.lock:
            self._counts[target] += 1
            number = self._counts[target]
        for fault in self.faults:
            if fault.target == target and (fault.times is None or number <= fault.times):
                return fault
        return None

    def record(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        with self.log.lock:
            self.log.requests.append(Request(handler.path, handler.headers.get("Range", ""), status, time.monotonic()))

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?")[0]
        if path.rstrip("/") == "/simple/vllm":
            kind, body = self.page_body or self.render_page()
            self.send(handler, "page", 200, {"Content-Type": kind}, body)
            return
        number = path.removeprefix("/files/")
        if path.startswith("/files/") and number.isdigit() and int(number) < len(self.files):
            self.send_file(handler, self.files[int(number)].path)
            return
        self.record(handler, 404)
        handler.send_error(404)

    def render_page(self) -> tuple[str, bytes]:
        if self.page == "json":
            entries = [
                {"filename": f.filename, "url": f"/files/{n}", "hashes": {"sha256": f.sha256}}
                | ({"size": f.size} if f.size is not None else {})
                for n, f in enumerate(self.files)
            ]
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": "vllm", "files": entries}).encode()
            return "application/vnd.pypi.simple.v1+json", body
        anchors = "".join(
            f'<a href="/files/{n}#sha256={f.sha256}">{html.escape(f.filename)}</a><br/>\n'
            for n, f in enumerate(self.files)
        )
        return "text/html", f"<!DOCTYPE html><html><body>\n{anchors}</body></html>\n".encode()

    def send_file(self, handler: BaseHTTPRequestHandler, path: Path) -> None:
        data = path.read_bytes()
        size = len(data)
        match = RANGE_RE.match(handler.headers.get("Range", ""))
        if not match or match.groups() == ("", ""):
            self.send(handler, "file", 200, {"Accept-Ranges": "bytes"}, data)
            return
        first, last = match.groups()
        start = max(0, size - int(last)) if first == "" else int(first)
        end = size - 1 if first == "" or not last else min(size - 1, int(last))
        headers = {"Accept-Ranges": "bytes", "Content-Range": f"bytes {start}-{end}/{size}"}
        self.send(handler, "file", 206, headers, data[start : end + 1], whole=data)

    def send(
        self,
        handler: BaseHTTPRequestHandler,
        target: str,
        status: int,
        headers: dict[str, str],
        body: bytes,
        whole: bytes = b"",
    ) -> None:
        fault = self.fault_for(target)
        kind = fault.kind if fault else ""
        if fault is not None and kind == "status":
            status, body, headers = fault.status, b"not now\n", {"Content-Type": "text/plain"}
            if fault.retry_after is not None:
                headers["Retry-After"] = fault.retry_after
        if kind == "wrong-range" and status == 206:
            # The bytes one further on than asked, labelled as such: an honest answer to another question.
            first, last = (int(x) for x in headers["Content-Range"].split()[1].split("/")[0].split("-"))
            first, last = first + 1, min(last + 1, len(whole) - 1)
            headers["Content-Range"] = f"bytes {first}-{last}/{len(whole)}"
            body = whole[first : last + 1]
        self.record(handler, status)
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        if kind in ("cut", "stall", "drip"):
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        handler.wfile.flush()
        if kind == "cut":
            handler.wfile.write(body[: len(body) // 2])
        elif kind == "stall":
            self.closing.wait()  # the head, then nothing until the test ends
        elif kind == "drip":
            assert fault is not None
            for byte in body:
                if self.closing.wait(fault.interval):
                    break
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
        else:
            handler.wfile.write(body)
