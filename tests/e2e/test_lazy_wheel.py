"""The lazy wheel reader and the wheel cache, against a real release wheel on a loopback index.

The wheel is the pinned tag's real release wheel (UPSTREAM.toml says which), served by a real
HTTP server on 127.0.0.1 that honours or refuses `Range` and counts every byte it sends.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers import run_release, snapshot
from helpers.failure import failed
from helpers.index_server import LoopbackIndex
from release.core.errors import WheelIntegrityError
from release.core.hashing import file_sha256, sha256_hex
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.model.pin import Pin
from release.model.source import Source
from release.pristine.index import INDEX_ENV
from release.pristine.sources import fetch
from release.pristine.wheel import pypi_content, pypi_wheel, subtree_member

pytestmark = pytest.mark.network  # the pinned release wheel comes from the package index once, then the cache

PREFIX = UPSTREAM_SUBTREE + "/"


@pytest.fixture(scope="module")
def pin() -> Pin:
    return Pin.load(Layout.default().upstream_toml)


@pytest.fixture(scope="module")
def real_wheel(pin: Pin) -> Path:
    wheel = pypi_wheel(pin.tag)
    assert wheel.name == pin.wheel and file_sha256(wheel) == pin.wheel_sha256
    return wheel


@pytest.fixture(autouse=True)
def drop_wheel_copies(tmp_path: Path) -> Iterator[None]:
    """Each test here may leave 250-450 MB of wheel copies; pytest keeps old tmp dirs, so drop them."""
    yield
    for name in ("cache", "served"):
        shutil.rmtree(tmp_path / name, ignore_errors=True)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of our own, so nothing here touches the user's."""
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "wheels"


def subtree_hashes(files: dict[str, bytes]) -> dict[str, str]:
    return {name.removeprefix(PREFIX): sha256_hex(data) for name, data in sorted(files.items())}


@pytest.mark.parametrize("page", ["json", "html"])
def test_lazy_read_fetches_a_few_hundred_kb_and_verifies_every_member(
    pin: Pin,
    real_wheel: Path,
    cache: Path,
    page: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LoopbackIndex([real_wheel], page=page) as index:
        monkeypatch.setenv(INDEX_ENV, index.url)
        content = pypi_content(pin.version, subtree_member)
        sent_for_lazy_read = index.served.file_bytes
        # The same identity and bytes as the whole wheel: what UPSTREAM.toml recorded from it.
        assert (content.wheel, content.wheel_sha256) == (pin.wheel, pin.wheel_sha256)
        assert subtree_hashes(content.files) == pin.files
        assert content.how == "range requests"
        assert all(status == 206 for status, _ in index.served.file_requests)
        # What went over the wire, counted by the server and by the reader alike.
        assert sent_for_lazy_read == content.transfer.bytes
        assert content.transfer.requests == len(index.served.file_requests) <= 5
        assert content.transfer.bytes < 2_000_000
        assert real_wheel.stat().st_size > 100 * content.transfer.bytes

        # A second lazy read of the same modules (what `train check` does) is offline: the members the
        # first one cached. (`rebase` and `train add` read the whole wheel: tests/e2e/test_index_trust.py.)
        tree = fetch(pin.tag, Source.parse("pypi"), lazy=True)
        assert tree.file_hashes() == pin.files and tree.wheel_sha256 == pin.wheel_sha256
        assert index.served.file_bytes == sent_for_lazy_read

        # A damaged members cache is noticed, dropped and read again from the index.
        members = next(cache.glob("*/*.members.zip"))
        members.write_bytes(members.read_bytes()[:-100])
        again = pypi_content(pin.version, subtree_member)
        assert again.how == "range requests" and subtree_hashes(again.files) == pin.files
    assert "are unusable" in capsys.readouterr().err


def test_a_server_that_refuses_ranges_gets_a_full_download(
    pin: Pin, real_wheel: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    size = real_wheel.stat().st_size
    with LoopbackIndex([real_wheel], refuse_ranges=True) as index:
        monkeypatch.setenv(INDEX_ENV, index.url)
        content = pypi_content(pin.version, subtree_member)
    assert content.how == "full download"
    assert subtree_hashes(content.files) == pin.files and content.wheel_sha256 == pin.wheel_sha256
    assert content.transfer.bytes == size  # the whole file, once
    assert index.served.file_bytes >= size
    assert {status for status, _ in index.served.file_requests} == {200}
    downloaded = cache / pin.version / pin.wheel
    assert file_sha256(downloaded) == pin.wheel_sha256
    assert "does not serve byte ranges" in capsys.readouterr().err


def _truncate(path: Path, source: Path) -> None:
    with source.open("rb") as whole:
        path.write_bytes(whole.read(5_000_000))


def _flip_a_byte(path: Path, source: Path) -> None:
    shutil.copyfile(source, path)
    with path.open("r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("spoil", [_truncate, _flip_a_byte])
def test_a_corrupt_cached_wheel_is_downloaded_again_and_the_user_told(
    pin: Pin, real_wheel: Path, project: Path, tmp_path: Path, spoil: Callable[[Path, Path], None]
) -> None:
    cached = tmp_path / "cache" / "wheels" / pin.version / pin.wheel
    cached.parent.mkdir(parents=True)
    spoil(cached, real_wheel)
    with LoopbackIndex([real_wheel]) as index:
        env = {"VLLM_FUSED_MOE_CACHE": str(tmp_path / "cache"), INDEX_ENV: index.url}
        report = tmp_path / "r"
        result = run_release(
            project, "rebase", pin.tag, "--from", "pypi", "--dry-run", "--report", str(report), env=env
        )
        assert result.returncode == 0, result.stderr
        assert f"cached {cached} is corrupt" in result.stderr and "downloading it again" in result.stderr
        assert file_sha256(cached) == pin.wheel_sha256
        assert json.loads((report / "rebase-report.json").read_text())["result"] == "nothing-to-do"
        sent = index.served.file_bytes
        # The next run finds a sound cache: nothing said, nothing downloaded.
        quiet = run_release(project, "rebase", pin.tag, "--from", "pypi", "--dry-run", "--report", str(report), env=env)
        assert quiet.returncode == 0 and "is corrupt" not in quiet.stderr
        assert index.served.file_bytes == sent


def tampered_wheel(real_wheel: Path, target: Path) -> None:
    """The real wheel's subtree, METADATA and RECORD, with one module changed but RECORD not."""
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(real_wheel) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            name = info.filename
            if name.startswith(PREFIX) or name.endswith((".dist-info/METADATA", ".dist-info/RECORD")):
                data = source.read(info)
                if name.endswith("/flashinfer_nvlink_two_sided.py"):
                    data += b"\n# not what RECORD says\n"
                out.writestr(info, data)
    target.write_bytes(buffer.getvalue())


@pytest.mark.parametrize("how", ["pypi", "wheel"])
def test_a_member_that_differs_from_record_is_refused_with_exit_2(
    pin: Pin, real_wheel: Path, project: Path, tmp_path: Path, how: str
) -> None:
    bad = tmp_path / "served" / pin.wheel
    tampered_wheel(real_wheel, bad)
    before = snapshot(project)
    with LoopbackIndex([bad]) as index:
        env = {"VLLM_FUSED_MOE_CACHE": str(tmp_path / "cache"), INDEX_ENV: index.url}
        source = "pypi" if how == "pypi" else f"wheel:{bad}"
        result = run_release(project, "rebase", pin.tag, "--from", source, "--report", str(tmp_path / "r"), env=env)
    assert result.returncode == 2, result.stderr
    error = failed(result)
    assert error.reference == WheelIntegrityError.reference and error.hint, result.stderr
    assert "flashinfer_nvlink_two_sided.py does not match its RECORD entry" in error.message  # which file is the point
    assert "Traceback" not in result.stderr
    assert snapshot(project) == before
    assert not list((tmp_path / "cache").rglob("*.members.zip"))  # nothing unverified was cached
