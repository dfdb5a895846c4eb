"""What the index may name and how long a network read may take, against loopback addresses in this process.

The rules on names alone: tests/unit/test_index_trust.py. The end-to-end attacks through the CLI and a
real package index: tests/e2e/test_index_trust.py. These two reach a socket (an address where nothing
listens, a real server that drips), which the unit tier refuses.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import LOADED_MACHINE_S
from release.core.errors import EXIT_TRANSPORT, CompletionRequestError, UnsafeIndexError
from release.gsm8k.client import CompletionsClient, CompletionSettings
from release.pristine import transport
from release.pristine.index import INDEX_ENV
from release.pristine.wheel import lookup


def test_a_cache_entry_with_a_traversal_name_is_refused_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index entry kept in the cache for offline use is held to the same rule as the index's answer."""
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(INDEX_ENV, "http://127.0.0.1:9/simple/")  # nothing listens: offline
    monkeypatch.setenv(transport.RETRIES_ENV, "0")
    version_dir = tmp_path / "cache" / "wheels" / "0.20.99"
    version_dir.mkdir(parents=True)
    entry = {
        "filename": "vllm-0.20.99-1/../../../../x-cp38-abi3-any.whl",
        "url": "http://127.0.0.1:9/x.whl",
        "sha256": "0" * 64,
        "size": 1,
        "version": "0.20.99",
        "build": 1,
        "yanked": False,
    }
    (version_dir / "vllm-0.20.99-cp38-abi3-any.whl.index.json").write_text(json.dumps(entry))
    with pytest.raises(UnsafeIndexError, match="is not a base name"):
        lookup("0.20.99")


class Drip(BaseHTTPRequestHandler):
    """Answers any POST with a head that promises 200 bytes, then sends one every 0.2 s."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "200")
        self.end_headers()
        try:
            for _ in range(200):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: what it should do


def test_a_completions_server_that_drips_is_given_up_on_at_the_deadline_with_exit_4() -> None:
    """gsm8k's client: before, `response.read()` waited out all 200 bytes (40 s) per attempt."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = CompletionSettings(model="m", request_timeout_s=1.0, retries=1, retry_backoff_s=0.1)
        client = CompletionsClient(f"http://127.0.0.1:{server.server_port}", settings)
        started = time.monotonic()
        with pytest.raises(CompletionRequestError, match="not complete in time") as failed:
            client.complete("2 + 2 =")
        elapsed = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert failed.value.exit_code == EXIT_TRANSPORT
    # Two attempts of one deadline each, the backoff between them, and one last wait for a byte.
    # Broken, each attempt waits out the drip's 200 bytes (40 s): far above the bound even on a loaded machine.
    assert elapsed < 2 * settings.request_timeout_s + settings.retry_backoff_s + LOADED_MACHINE_S, elapsed
