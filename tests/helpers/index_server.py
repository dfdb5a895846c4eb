"""A real package index on 127.0.0.1: a PEP 691 (or PEP 503) project page and wheel files with Range support.

Not a double of our code: a plain HTTP server (http.server) serving real wheel files, which
counts every body byte it sends, so tests assert what went over the wire. `refuse_ranges`
makes it answer every request with the whole file (HTTP 200), as some mirrors do.
"""

from __future__ import annotations

import html
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

from release.core.hashing import file_sha256

RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Served:
    """What the server sent: body bytes of wheel files, and each file request's (status, Range)."""

    file_bytes: int = 0
    file_requests: list[tuple[int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class LoopbackIndex:
    def __init__(self, wheels: list[Path], refuse_ranges: bool = False, page: str = "json") -> None:
        self.wheels = {w.name: w for w in wheels}
        self.sha256 = {w.name: file_sha256(w) for w in wheels}
        self.refuse_ranges = refuse_ranges
        self.page = page
        self.served = Served()
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet test output
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/simple/vllm":
                    index.send_page(self)
                elif self.path.startswith("/files/") and self.path[7:] in index.wheels:
                    index.send_file(self, index.wheels[self.path[7:]])
                else:
                    self.send_error(404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/simple/"

    def __enter__(self) -> LoopbackIndex:
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()

    def send_page(self, handler: BaseHTTPRequestHandler) -> None:
        if self.page == "json":
            files = [
                {"filename": n, "url": f"/files/{n}", "hashes": {"sha256": self.sha256[n]}, "size": p.stat().st_size}
                for n, p in self.wheels.items()
            ]
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": "vllm", "files": files}).encode()
            kind = "application/vnd.pypi.simple.v1+json"
        else:
            anchors = "".join(
                f'<a href="/files/{html.escape(n)}#sha256={self.sha256[n]}">{html.escape(n)}</a><br/>\n'
                for n in self.wheels
            )
            body = f"<!DOCTYPE html><html><body>\n{anchors}</body></html>\n".encode()
            kind = "text/html"
        handler.send_response(200)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def send_file(self, handler: BaseHTTPRequestHandler, path: Path) -> None:
        size = path.stat().st_size
        asked = handler.headers.get("Range", "")
        match = RANGE_RE.match(asked)
        if self.refuse_ranges or not match or match.groups() == ("", ""):
            status, start, end = 200, 0, size - 1
        else:
            first, last = match.groups()
            if first == "":
                start, end = max(0, size - int(last)), size - 1
            else:
                start, end = int(first), min(size - 1, int(last) if last else size - 1)
            status = 206
        handler.send_response(status)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(end - start + 1))
        handler.send_header("Accept-Ranges", "none" if self.refuse_ranges else "bytes")
        if status == 206:
            handler.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        handler.end_headers()
        with self.served.lock:
            self.served.file_requests.append((status, asked))
        sent = 0
        try:
            with path.open("rb") as source:
                source.seek(start)
                left = end - start + 1
                while left > 0:
                    block = source.read(min(left, 1 << 20))
                    handler.wfile.write(block)
                    sent += len(block)
                    left -= len(block)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up (it wanted a range, not this whole file)
        with self.served.lock:
            self.served.file_bytes += sent
