"""In-process checks of what the index may name and how long any network read may take.

The end-to-end attacks (a traversal name, a tampered wheel, a broken transport, through the CLI)
are in tests/e2e/test_index_trust.py; here the rules themselves, on real names and real servers.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from release.core.errors import EXIT_TRANSPORT, BadInputError, CompletionRequestError, UnsafeIndexError
from release.gsm8k.client import CompletionsClient, CompletionSettings
from release.pristine import transport
from release.pristine.index import INDEX_ENV, checked_name
from release.pristine.wheel import lookup

# Names as PyPI lists them for vllm (a build tag, manylinux tags old and new, a post release, per-CPython).
REAL = [
    ("vllm-0.21.0-1-cp38-abi3-manylinux_2_24_x86_64.whl", "0.21.0"),
    ("vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl", "0.20.0"),
    ("vllm-0.6.1.post1-cp38-abi3-manylinux1_x86_64.whl", "0.6.1.post1"),
    ("vllm-0.1.4-cp310-cp310-manylinux1_x86_64.whl", "0.1.4"),
    ("vllm-0.10.1.1-cp38-abi3-manylinux1_x86_64.whl", "0.10.1.1"),
]
REFUSED = {
    "a parent in the build tag": ("vllm-0.21.0-1/../../../../x-cp38-abi3-any.whl", "is not a base name"),
    "an absolute name": ("/tmp/vllm-0.21.0-cp38-abi3-any.whl", "is not a base name"),
    "a backslash": ("..\\vllm-0.21.0-cp38-abi3-any.whl", "path separator"),
    "a parent alone": ("..", "is not a base name"),
    "another project": ("torch-0.21.0-cp38-abi3-any.whl", "is not a wheel of vllm"),
    "a name spelled otherwise": ("VLLM-0.21.0-cp38-abi3-any.whl", "is not a wheel file name"),
    "a version not canonical": ("vllm-0.21.0.post01-cp38-abi3-any.whl", "does not spell its version canonically"),
    "another version": ("vllm-0.20.0-cp38-abi3-any.whl", "is not a wheel of vllm 0.21.0"),
    "an sdist": ("vllm-0.21.0.tar.gz", "is not a wheel file name"),
}


@pytest.mark.parametrize(("name", "version"), REAL)
def test_real_release_names_pass(name: str, version: str) -> None:
    assert checked_name(name, version) == name


@pytest.mark.parametrize(("name", "why"), REFUSED.values(), ids=REFUSED.keys())
def test_a_name_that_is_no_canonical_base_name_of_the_release_asked_is_exit_2(name: str, why: str) -> None:
    with pytest.raises(UnsafeIndexError, match=why) as refused:
        checked_name(name, "0.21.0")
    assert refused.value.exit_code == 2


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


@pytest.mark.parametrize("value", ["soon", "-1", "0"])
def test_a_wait_setting_that_is_no_positive_number_is_bad_input(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(transport.DEADLINE_ENV, value)
    with pytest.raises(BadInputError, match=transport.DEADLINE_ENV):
        transport.settings()


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
    assert elapsed < 2 * settings.request_timeout_s + settings.retry_backoff_s + 1.0, elapsed


# ------------------------------------------------------------------ one reader of index pages

SHA = "ab" * 32
WHEEL = "vllm-0.21.0-1-cp38-abi3-manylinux_2_24_x86_64.whl"
JSON_PAGE = {
    "meta": {"api-version": "1.1"},
    "name": "vllm",
    "files": [
        {"filename": WHEEL, "url": "../../files/a/" + WHEEL, "hashes": {"sha256": SHA}, "yanked": "broken"},
        {"filename": "vllm-0.21.0.tar.gz", "url": "../../files/b/vllm-0.21.0.tar.gz", "hashes": {"sha256": SHA}},
    ],
}
# The same page as a mirror may write its HTML: single quotes, upper-case tags, the name inside a span,
# an entity in the URL, a bare `data-yanked`. The regexes this reader replaced found no wheel on it.
HTML_PAGE = f"""<!DOCTYPE html><html><body>
<A HREF='../../files/a/{WHEEL}#sha256={SHA}' data-yanked><span>{WHEEL}</span></A><br/>
<a href="../../files/b/vllm-0.21.0.tar.gz#sha256={SHA}&amp;x=1">vllm-0.21.0.tar.gz</a>
</body></html>"""
PAGE_URL = "https://mirror.example/simple/vllm/"


def test_a_json_page_and_the_same_page_in_html_give_the_same_wheels() -> None:
    from release.pristine.index import IndexFile, parse_project_page, wheels_on

    expected = (IndexFile(WHEEL, f"https://mirror.example/files/a/{WHEEL}", SHA, None, "0.21.0", 1, yanked=True),)
    as_json = wheels_on(
        parse_project_page(PAGE_URL, "application/vnd.pypi.simple.v1+json", json.dumps(JSON_PAGE)), PAGE_URL
    )
    as_html = wheels_on(parse_project_page(PAGE_URL, "text/html", HTML_PAGE), PAGE_URL)
    assert as_json == as_html == expected


@pytest.mark.parametrize(
    ("page", "what"),
    [
        ({**JSON_PAGE, "files": [1]}, "`files[0]`"),
        ({**JSON_PAGE, "files": {WHEEL: {}}}, "`files`"),
        ({**JSON_PAGE, "files": [{**JSON_PAGE["files"][0], "hashes": "sha256=00"}]}, "`files[0].hashes`"),
        ({**JSON_PAGE, "meta": {"api-version": "2.0"}}, "2.0"),
    ],
)
def test_a_json_page_of_the_wrong_shape_says_where_in_one_line(page: dict[str, object], what: str) -> None:
    from release.core.errors import PackageIndexError
    from release.pristine.index import parse_project_page

    with pytest.raises(PackageIndexError, match="is not a PEP 691 project page") as refused:
        parse_project_page(PAGE_URL, "application/vnd.pypi.simple.v1+json", json.dumps(page))
    assert what in str(refused.value) and "\n" not in str(refused.value)
    assert refused.value.exit_code == EXIT_TRANSPORT


def test_a_traversal_name_on_an_html_page_is_refused_by_the_reader() -> None:
    from release.pristine.index import parse_project_page, wheels_on

    evil = "vllm-0.21.0-1/../../../../x-cp38-abi3-any.whl"
    page = parse_project_page(PAGE_URL, "text/html", f'<a href="x.whl#sha256={SHA}">{evil}</a>')
    with pytest.raises(UnsafeIndexError, match="is not a base name"):
        wheels_on(page, PAGE_URL)
