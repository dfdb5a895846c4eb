"""The package index is untrusted: names, digests and the transport, against a hostile index on 127.0.0.1.

Every test runs the real CLI (`python -m release`) against tests/helpers/hostile_index.py, a real
HTTP server that lists and serves what it is told and breaks the way it is told. The wheels are
real wheels of vLLM's own files for a synthetic tag no real index has (tests/helpers/synthetic.py),
so nothing here reaches the network. Each case says what goes wrong where the guard it tests is missing.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import socket
import threading
import time
import zipfile
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from helpers import LOADED_MACHINE_S, run_release, snapshot, work_leftovers
from helpers.failure import failed
from helpers.hostile_index import Fault, HostileIndex, Listed
from helpers.synthetic import NEXT_TAG, SUBTREE, make_wheel, next_tree
from release.core.errors import UnsafeIndexError, WheelIntegrityError
from release.core.hashing import file_sha256
from release.core.layout import Layout
from release.pristine.index import INDEX_ENV
from release.pristine.transport import DEADLINE_ENV, RETRIES_ENV, TIMEOUT_ENV
from release.queue.load import Queue

VERSION = NEXT_TAG.removeprefix("v")
NAME = f"vllm-{VERSION}-cp38-abi3-manylinux_2_35_x86_64.whl"
# Short waits, so a stalled or dripping server is given up on in seconds: what the environment
# variables are for (docs/guarantees.md).
TIMEOUT, DEADLINE, RETRIES = 1.0, 4.0, 2
# Where the server never lets a read finish, each test waits out the whole deadline: shorter still,
# as the work that must finish inside one (a retry after Retry-After: 1) is not in those tests.
GIVE_UP_TIMEOUT, GIVE_UP_DEADLINE = 0.5, 2.0
# A run of the CLI: the interpreter starts, imports, proves vendor/ clean (git), before any request.
STARTUP = 20.0
SCAN_ONE = ("scan", "--since", VERSION, "--until", VERSION, "--json", "--dry-run")


def env_for(index: HostileIndex, cache: Path, timeout: float = TIMEOUT, deadline: float = DEADLINE) -> dict[str, str]:
    return {
        "VLLM_FUSED_MOE_CACHE": str(cache),
        INDEX_ENV: index.url,
        TIMEOUT_ENV: str(timeout),
        DEADLINE_ENV: str(deadline),
        RETRIES_ENV: str(RETRIES),
    }


def one_error(stderr: str) -> str:
    """The message of the single error (with a hint), never a traceback: what the index did wrong is the point."""
    assert "Traceback" not in stderr, stderr
    error = failed(stderr)
    assert error.hint, stderr
    return error.message


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture
def good_wheel(project: Path, tmp_path: Path) -> Path:
    return make_wheel(tmp_path / "src" / NAME, next_tree(project), VERSION)


# ------------------------------------------------------------------ names


# packaging.utils.parse_wheel_filename takes this: it checks the tags, not the build tag's text after its digits.
# Joined to the cache's version directory it names box/escaped-….whl, beside the cache.
TRAVERSAL = f"vllm-{VERSION}-1/../../../../escaped-cp38-abi3-manylinux_2_35_x86_64.whl"


@pytest.mark.parametrize("page", ["json", "html"])
@pytest.mark.parametrize("command", ["rebase", "scan"])
def test_a_traversal_name_from_the_index_is_refused_before_it_touches_a_path(
    project: Path, tmp_path: Path, good_wheel: Path, page: str, command: str
) -> None:
    """Unchecked, the name makes `--from pypi` write escaped-….whl.index.json (and, lazily, .members.zip;
    with a 200, the whole wheel) into tmp_path/box, outside the cache, and record it in UPSTREAM.toml and train.toml."""
    assert parse_wheel_filename(TRAVERSAL)[2] == (1, "/../../../../escaped")
    box = tmp_path / "box"
    cache = box / "cache"
    before = snapshot(project)
    with HostileIndex([Listed(good_wheel, filename=TRAVERSAL)], page=page) as index:
        args = (
            ("rebase", NEXT_TAG, "--from", "pypi", "--report", str(tmp_path / "r")) if command == "rebase" else SCAN_ONE
        )
        result = run_release(project, *args, env=env_for(index, cache))
    assert result.returncode == 2, result.stderr
    error = one_error(result.stderr)
    assert failed(result).reference == UnsafeIndexError.reference, result.stderr
    assert repr(TRAVERSAL) in error and "is not a base name" in error
    assert files_under(box) == []  # nothing in the cache, nothing beside it
    assert snapshot(project) == before  # nothing recorded
    assert work_leftovers(project) == []
    assert index.log.of("file") == []  # not even read


# ------------------------------------------------------------------ digests


def stored_wheel(path: Path, files: dict[str, bytes], version: str) -> Path:
    """A real wheel with every member stored (not deflated), so a same-length edit keeps the file's size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    dist_info = f"vllm-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\nRequires-Dist: flashinfer-python==0.6.8.post1\n"
    members = [(f"{SUBTREE}/{n}", d) for n, d in sorted(files.items())] + [(f"{dist_info}/METADATA", metadata.encode())]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in members:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([name, f"sha256={digest}", len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members:
            archive.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), data)
        archive.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", (2026, 1, 1, 0, 0, 0)), record.getvalue())
    return path


def tampered_pair(project: Path, directory: Path) -> tuple[Path, Path, str]:
    """The genuine wheel and one of the same size whose module and RECORD were rebuilt to match; the module."""
    files = next_tree(project)
    patched = {path.split("/", 5)[-1] for patch in Queue.load(Layout(project)).patches for path in patch.files}
    module = next(n for n in sorted(files) if n.endswith(".py") and n not in patched and files[n])
    genuine = stored_wheel(directory / "genuine" / NAME, files, VERSION)
    changed = files[module].replace(b"# moved by upstream", b"# moved by attacker", 1)
    assert len(changed) == len(files[module]) and changed != files[module]
    tampered = stored_wheel(directory / "tampered" / NAME, {**files, module: changed}, VERSION)
    return genuine, tampered, module


@pytest.mark.parametrize("command", ["rebase", "train add"])
def test_a_same_size_wheel_with_a_rebuilt_record_is_refused_and_nothing_is_recorded(
    project: Path, tmp_path: Path, command: str
) -> None:
    """RECORD travels in the same file: a reader that checks each member against it alone vendors the
    tampered module, `check` passes, and the index's genuine sha256 is recorded for other bytes."""
    genuine, tampered, module = tampered_pair(project, tmp_path / "src")
    assert tampered.stat().st_size == genuine.stat().st_size and file_sha256(tampered) != file_sha256(genuine)
    cache = tmp_path / "cache"
    before = snapshot(project)
    # The index tells the truth about the genuine wheel (its sha256 and size); the file host serves the other.
    listed = Listed(tampered, sha256=file_sha256(genuine), size=genuine.stat().st_size)
    with HostileIndex([listed]) as index:
        args = (
            ["rebase", NEXT_TAG, "--report", str(tmp_path / "r")] if command == "rebase" else ["train", "add", NEXT_TAG]
        )
        result = run_release(project, *args, "--from", "pypi", env=env_for(index, cache))
        assert result.returncode == 2, result.stderr
        error = one_error(result.stderr)
        assert failed(result).reference == WheelIntegrityError.reference, result.stderr
        assert f"sha256 {file_sha256(tampered)}" in error and f"the index says {file_sha256(genuine)}" in error
        assert snapshot(project) == before  # nothing vendored, nothing recorded
        assert work_leftovers(project) == []
        assert not [
            p for p in cache.rglob("*") if p.name.endswith((".whl", ".members.zip", ".part")) or ".tmp-" in p.name
        ]

        # The scan may read lazily, and then cannot tell: it says so in its output.
        scanned = run_release(project, *SCAN_ONE, env=env_for(index, cache))
    assert scanned.returncode == 0, scanned.stderr
    document = json.loads(scanned.stdout)
    assert "membership, not identity" in document["read"]
    assert document["releases"][VERSION]["wheel_sha256"] == file_sha256(genuine)  # the claim it cannot check
    assert b"moved by attacker" not in (Layout(project).subtree / module).read_bytes()


def test_the_genuine_wheel_goes_through_and_its_verified_digest_is_recorded(project: Path, tmp_path: Path) -> None:
    genuine, _, _ = tampered_pair(project, tmp_path / "src")
    with HostileIndex([Listed(genuine)]) as index:
        result = run_release(
            project, "rebase", NEXT_TAG, "--from", "pypi", "--report", str(tmp_path / "r"),
            env=env_for(index, tmp_path / "cache"),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pin = (project / "vendor/vllm_fused_moe/UPSTREAM.toml").read_text()
    assert f'wheel = "{NAME}"' in pin and f'wheel_sha256 = "{file_sha256(genuine)}"' in pin
    # The whole file, once: what the digest was checked on.
    assert [(r.status, r.range) for r in index.log.of("file")] == [(200, "")]
    assert (tmp_path / "cache" / "wheels" / VERSION / NAME).is_file()


# ------------------------------------------------------------------ wheel:PATH


def test_a_local_wheel_is_recorded_by_name_and_digest_not_by_where_it_lay(
    project: Path, tmp_path: Path, good_wheel: Path
) -> None:
    """A recorded `source = "wheel:/tmp/.../vllm-….whl"` would be a path of one machine, useless on any other."""
    source = f"wheel:{good_wheel.resolve()}"
    result = run_release(project, "rebase", NEXT_TAG, "--from", source, "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    added = run_release(project, "train", "add", NEXT_TAG, "--from", source)
    assert added.returncode == 0, added.stderr
    layout = Layout(project)
    for committed in (layout.upstream_toml, layout.train):
        text = committed.read_text()
        assert str(good_wheel.parent) not in text and str(tmp_path) not in text, committed
        assert f'source = "wheel:{NAME}"' in text and f'wheel = "{NAME}"' in text, committed
        assert f'wheel_sha256 = "{file_sha256(good_wheel)}"' in text, committed
    assert run_release(project, "check").returncode == 0


# ------------------------------------------------------------------ the transport

WRONG_TYPES = {
    "an entry that is a number": {"files": [1]},
    "a filename that is a list": {"files": [{"filename": [NAME], "url": "/files/0", "hashes": {}}]},
    "hashes that are a string": {"files": [{"filename": NAME, "url": "/files/0", "hashes": "sha256=00"}]},
    "files that are an object": {"files": {NAME: {}}},
}


@pytest.mark.parametrize("page", WRONG_TYPES.values(), ids=WRONG_TYPES.keys())
def test_a_json_page_of_the_wrong_shape_is_one_line_and_exit_4(
    project: Path, tmp_path: Path, good_wheel: Path, page: dict[str, object]
) -> None:
    """Read without checking its shape, such a page ends in `AttributeError: 'int' object has no attribute
    'get'` and the like, exit 1 with a traceback."""
    body = ("application/vnd.pypi.simple.v1+json", json.dumps(page).encode())
    before = snapshot(project)
    with HostileIndex([Listed(good_wheel)], page_body=body) as index:
        for args in (("rebase", NEXT_TAG, "--from", "pypi"), SCAN_ONE):
            result = run_release(project, *args, env=env_for(index, tmp_path / "cache"))
            assert result.returncode == 4, result.stderr
            assert "is not a PEP 691 project page" in one_error(result.stderr)
    assert snapshot(project) == before


# (fault, command): scan reads by range requests, rebase downloads the whole wheel.
BROKEN = [
    (Fault("cut"), "scan"),  # before: IncompleteRead, or a short range trusted
    (Fault("wrong-range"), "scan"),  # before: AssertionError in LazyHTTPFile.read
    (Fault("stall"), "scan"),  # before: ReadTimeoutError after 121 s
    (Fault("drip", interval=0.3), "scan"),  # before: nothing bounded it
    (Fault("cut"), "rebase"),
    (Fault("stall"), "rebase"),
    (Fault("drip", interval=0.3), "rebase"),
    (Fault("stall", target="page"), "rebase"),
    (Fault("drip", target="page", interval=0.3), "scan"),
    (Fault("status", status=503), "rebase"),  # retried, then given up: the same one line and code
]


@pytest.mark.parametrize(
    ("fault", "command"), BROKEN, ids=[f"{f.kind}-{f.target}-{c}" for f, c in BROKEN]
)  # fmt: skip
def test_a_broken_transport_is_one_line_exit_4_within_the_deadline(
    project: Path, tmp_path: Path, good_wheel: Path, fault: Fault, command: str
) -> None:
    before = snapshot(project)
    args = ("rebase", NEXT_TAG, "--from", "pypi", "--report", str(tmp_path / "r")) if command == "rebase" else SCAN_ONE
    with HostileIndex([Listed(good_wheel)], faults=[fault]) as index:
        started = time.monotonic()
        result = run_release(project, *args, env=env_for(index, tmp_path / "cache", GIVE_UP_TIMEOUT, GIVE_UP_DEADLINE))
        ended = time.monotonic()
        log = index.log
        requests = log.requests
    assert result.returncode == 4, (result.returncode, result.stderr)
    error = one_error(result.stderr)
    assert "127.0.0.1" in error
    # From the first request the server saw to the exit: one deadline, and at most one request timeout more.
    took = ended - requests[0].at if requests else None
    # Broken, a stall holds the read until the test's own timeout (300 s): far above the bound under load too.
    assert took is not None and took < GIVE_UP_DEADLINE + GIVE_UP_TIMEOUT + LOADED_MACHINE_S, (took, error)
    assert ended - started < GIVE_UP_DEADLINE + GIVE_UP_TIMEOUT + STARTUP
    if fault.kind in ("stall", "drip"):
        assert "VLLM_FUSED_MOE_HTTP_" in error  # it names the setting that bounded it
    if fault.kind in ("cut", "stall", "status"):
        assert len(log.of(fault.target)) > 1  # it was retried
    assert snapshot(project) == before
    assert not [
        p
        for p in (tmp_path / "cache").rglob("*")
        if p.name.endswith((".whl", ".part", ".members.zip")) or ".tmp-" in p.name
    ]


RECOVERS = [
    (Fault("status", target="page", status=503, times=2), "rebase", 3),
    (Fault("status", target="file", status=503, times=1), "scan", None),
    (Fault("status", target="file", status=429, retry_after="1", times=1), "rebase", None),
]


@pytest.mark.parametrize(("fault", "command", "page_requests"), RECOVERS, ids=["503-page", "503-range", "429-file"])
def test_429_and_5xx_are_retried_with_backoff_and_the_command_succeeds(
    project: Path, tmp_path: Path, good_wheel: Path, fault: Fault, command: str, page_requests: int | None
) -> None:
    args = ("rebase", NEXT_TAG, "--from", "pypi", "--dry-run", "--report", str(tmp_path / "r"))
    with HostileIndex([Listed(good_wheel)], faults=[fault]) as index:
        result = run_release(
            project, *(args if command == "rebase" else SCAN_ONE), env=env_for(index, tmp_path / "cache")
        )
        log = index.log
    assert result.returncode == 0, result.stderr
    failed = [r for r in log.requests if r.status == fault.status]
    assert len(failed) == fault.times
    if page_requests is not None:
        assert len(log.of("page")) == page_requests
    if fault.retry_after is not None:
        again = next(r for r in log.of("file") if r.status != fault.status)
        assert again.at - failed[0].at >= float(fault.retry_after) - 0.05  # Retry-After was honoured


# ------------------------------------------------------------------ git remotes


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never says a word."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self.accept, daemon=True)

    def accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.held.append(connection)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}/vllm.git"

    def __exit__(self, *exc: object) -> None:
        self.socket.close()
        for connection in self.held:
            connection.close()


@pytest.mark.parametrize("command", ["tags", "rebase"])
def test_a_git_remote_that_never_answers_is_exit_4_within_the_deadline(project: Path, command: str) -> None:
    """Without the deadline `tags` waits for git's own timeout and `rebase --from git+URL` for as long as git does."""
    with SilentServer() as url:
        args = ("tags", "--remote", url) if command == "tags" else ("rebase", NEXT_TAG, "--from", f"git+{url}")
        started = time.monotonic()
        result = run_release(project, *args, env={DEADLINE_ENV: str(GIVE_UP_DEADLINE)})
        elapsed = time.monotonic() - started
    assert result.returncode == 4, result.stderr
    assert f"did not answer within {GIVE_UP_DEADLINE:.0f} s" in one_error(result.stderr)
    assert elapsed < GIVE_UP_DEADLINE + STARTUP
