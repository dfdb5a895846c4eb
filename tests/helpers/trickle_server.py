"""A real HTTP server on 127.0.0.1 for reads that must be bounded: it trickles, or checks credentials.

Not a double of our code: http.server answering over a real socket. `trickle` sends a declared body
one byte per `every` seconds (a read timeout per recv never fires; only a deadline for the whole
answer stops the reader); `files` are served whole, behind HTTP basic auth where `auth` is given.
"""

from __future__ import annotations

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class TrickleServer:
    def __init__(
        self, files: dict[str, bytes] | None = None, trickle: float | None = None, auth: str | None = None
    ) -> None:
        served, stopping = dict(files or {}), threading.Event()
        self.stopping = stopping
        self.requests: list[str] = []
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet test output
                pass

            def do_GET(self) -> None:
                requests.append(self.path)
                if auth is not None:
                    wanted = "Basic " + base64.b64encode(auth.encode()).decode()
                    if self.headers.get("Authorization") != wanted:
                        self.send_error(401)
                        return
                if trickle is not None:
                    self.send_response(200)
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    while not stopping.wait(trickle):
                        try:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        except OSError:  # the reader gave up: what the test waits for
                            return
                    return
                body = served.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> TrickleServer:
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()  # server_close joined the handlers: `stopping` ended the trickle
