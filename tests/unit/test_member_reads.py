"""A lazy read (`train check`, `build --all`, `pq carry`) of a whole wheel already cached proves membership
without hashing the whole file; an identity read (`train add`, `rebase`) still hashes it, every time.

The wheel is a real zip with a RECORD (helpers/synthetic.py) laid in a wheel cache under a temporary
VLLM_FUSED_MOE_CACHE, and the index's entry for it is given in place of the index (no network here).
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO
from helpers.synthetic import NEXT_TAG, SUBTREE, make_wheel
from release.core.errors import TransportError
from release.core.layout import Layout
from release.pristine import wheel
from release.pristine.index import IndexFile

VERSION = NEXT_TAG.removeprefix("v")
NAME = f"vllm-{VERSION}-cp38-abi3-manylinux_2_35_x86_64.whl"


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, bytes]]:
    """A whole release wheel in the wheel cache, and the index's entry for it (its size and sha256)."""
    files = Layout(REPO).vendor_files()
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    path = make_wheel(tmp_path / "cache" / "wheels" / VERSION / NAME, files, VERSION)
    data = path.read_bytes()
    entry = IndexFile(NAME, f"https://files.invalid/{NAME}", hashlib.sha256(data).hexdigest(), len(data), VERSION, None)
    monkeypatch.setattr(wheel, "release_wheel", lambda version: entry)
    return path, files


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every whole file hashed (hashlib.file_digest), by what it was."""
    seen: list[str] = []
    real: Callable[..., Any] = hashlib.file_digest

    def counting(handle: Any, digest: Any) -> Any:
        seen.append(str(getattr(handle, "name", handle)))
        return real(handle, digest)

    monkeypatch.setattr(hashlib, "file_digest", counting)
    return seen


def test_a_lazy_read_of_a_cached_wheel_checks_members_not_the_whole_file(
    cached: tuple[Path, dict[str, bytes]], hashed: list[str]
) -> None:
    path, files = cached
    tree = wheel.read_pypi(NEXT_TAG, lazy=True)
    assert tree.files == files
    assert hashed == []  # the members against RECORD, not the whole file
    assert not tree.wheel_verified  # the sha256 is the index's claim, as for a range read
    identity = wheel.read_pypi(NEXT_TAG)  # what train add and rebase record: hashed whole, every time
    assert identity.files == files and identity.wheel_verified
    assert hashed == [str(path)]


def test_a_cached_wheel_whose_member_differs_from_record_is_hashed_and_dropped(
    cached: tuple[Path, dict[str, bytes]], hashed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, files = cached
    name = sorted(files)[0]
    with zipfile.ZipFile(path) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w") as out:  # one member changed, RECORD not
        for info, data in members:
            out.writestr(info, data + b"# changed\n" if info.filename == f"{SUBTREE}/{name}" else data)

    def offline(*args: object, **kwargs: object) -> None:
        raise TransportError("offline (test)")

    monkeypatch.setattr(wheel, "download", offline)
    size = path.stat().st_size  # the index's size, so that RECORD is what finds the change
    monkeypatch.setattr(wheel, "release_wheel", lambda version: IndexFile(
        NAME, f"https://files.invalid/{NAME}", "0" * 64, size, VERSION, None))  # fmt: skip
    with pytest.raises(TransportError):
        wheel.read_pypi(NEXT_TAG, lazy=True)
    assert hashed == [str(path)] and not path.exists()  # hashed whole, found bad, deleted to be read again
