"""What `publish` reads and what it leaves in the index it serves.

It reads regular files only, of a bounded size: `/dev/zero` (endless bytes), a FIFO named `*.whl`
(an open that waits for a writer) and a link to either are refused at once with exit 2, the index
unchanged. And nothing in INDEX_DIR says who published (the directory is served over HTTP as it is).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import REPO
from helpers.failure import failed
from helpers.synthetic import demo_wheel
from helpers.unsafe_sources import declare_size
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, BadWheelError
from release.overlay import index as index_module
from release.overlay import wheel as wheel_module
from release.overlay.build import PROJECT


def publish(dist: Path, index: Path) -> int:
    return main(["--root", str(REPO), "publish", str(dist), str(index)])


def test_publish_refuses_dev_zero_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "index"
    assert publish(Path("/dev/zero"), index) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == BadWheelError.reference
    assert error.message == "/dev/zero is a character device, not a regular file; only regular files are read"
    assert not index.exists()


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "directory"])
def test_publish_refuses_a_dist_entry_that_is_no_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    dist = tmp_path / "dist"
    demo_wheel(dist, "1.0")
    odd = dist / "vllm_fused_moe-1.1-py3-none-any.whl"
    if kind == "fifo":
        os.mkfifo(odd)  # an open for reading without O_NONBLOCK waits for a writer forever
    elif kind == "directory":
        odd.mkdir()
    else:
        odd.symlink_to("/dev/zero")
    index = tmp_path / "index"
    assert publish(dist, index) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err, tmp_path)
    assert error.reference == BadWheelError.reference, error
    assert error.shown.startswith(f"error[{error.reference}]: [TMP]/dist/{odd.name} is a ")
    assert error.message.endswith("not a regular file; only regular files are read")
    assert not index.exists()


def test_publish_refuses_a_wheel_over_the_size_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = demo_wheel(tmp_path / "dist", "1.0")
    monkeypatch.setattr(wheel_module, "WHEEL_LIMIT", wheel.stat().st_size - 1)
    index = tmp_path / "index"
    assert publish(wheel, index) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == BadWheelError.reference
    assert error.message.startswith(f"{wheel} is {wheel.stat().st_size} bytes, over the ")
    assert not index.exists()


@pytest.mark.parametrize(("member", "size", "message"), [
    ("vllm_fused_moe-1.0.dist-info/METADATA", 2 << 30, "declares 2048 MiB, over the 64 MiB a member may have"),
    ("vllm_fused_moe-1.0.dist-info/METADATA", 8, "has corrupt data"),
])  # fmt: skip
def test_publish_refuses_a_member_that_declares_too_much_or_inflates_past_what_it_declares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], member: str, size: int, message: str
) -> None:
    """A 2 MB wheel whose member inflates to 2 GiB is one error line, never a MemoryError: the size the zip
    declares is checked before a byte is inflated; one that inflates past its declared size is cut off there."""
    wheel = demo_wheel(tmp_path / "dist", "1.0")
    declare_size(wheel, size, member)
    index = tmp_path / "index"
    assert publish(wheel, index) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == BadWheelError.reference and message in error.message and wheel.name in error.message
    assert not index.exists()


def test_the_index_holds_no_holder_file(tmp_path: Path) -> None:
    index = tmp_path / "index"
    (index).mkdir()
    (index / ".publish.lock.holder").write_text('{"command": "publish", "pid": 1}')  # served as it is
    # The index stage: the command refuses a demo wheel, which is no build of the checkout, before it writes.
    index_module.publish([demo_wheel(tmp_path / "dist", "1.0")], index, project=PROJECT)
    served = sorted(p.relative_to(index).as_posix() for p in index.rglob("*") if p.is_file())
    assert not [name for name in served if "holder" in name], served
    assert all(str(os.getpid()) not in (index / name).read_text("utf-8") for name in served if name.endswith(".lock"))
