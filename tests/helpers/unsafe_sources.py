"""Upstream sources that lie or try to escape, as real archives and trees: a wheel (`wheel:`, or
served by an index) and a directory (`dir:`) of the next tag, each spoiled one way (`kind`), or
"good". tests/unit/test_sources.py reads them in this process, tests/cli/test_source_safety.py
feeds them to the CLI; `files` is the subtree to carry (vLLM's own files, or any).
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from helpers.synthetic import NEXT_TAG, SUBTREE, make_dir, make_wheel, version_file

VERSION = NEXT_TAG.removeprefix("v")
# A release the source claims that is not the one asked for, whatever tag vendor/ is rebased onto.
OTHER_VERSION = VERSION.rsplit(".", 1)[0] + ".98"
# Far enough up from .work/rebase-TAG/repo/vllm/model_executor/layers/fused_moe/prepare_finalize/
# to land in the checkout itself, and further still.
CLIMB = "../" * 8

# What the reader says about each spoiled kind (a well-formed one, "good", goes through).
WHEEL_REFUSALS = {
    "dotdot": "`..` component",
    "absolute": "has an empty or `.` component",
    "symlink": "is a symbolic link",
    "no-metadata": "has no .dist-info/METADATA",
    "other-version": f"is vLLM {OTHER_VERSION}, not {NEXT_TAG}",
    "corrupt": "cannot read",
    "control-name": "the control character U+001B in the name",
    "long-name": "a component longer than 255 bytes",
    "declares-huge": "declares 2048 MiB, over the 64 MiB a member may have",
    "inflates-past-declared": "cannot read",
}
DIR_REFUSALS = {
    "file-link": "is a symbolic link",
    "replaced-by-link": "is a symbolic link",
    "dir-link": "is a symbolic link",
    "subtree-link": "is a symbolic link",
    "version-link": "is a symbolic link",
    "no-version": f"cannot prove it is vLLM {NEXT_TAG}",
    "other-version": f"says vLLM {OTHER_VERSION}, not {NEXT_TAG}",
}


def _symlink_member(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(f"{SUBTREE}/{name}")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def _corrupt(wheel: Path) -> Path:
    """Flip bytes inside one member's compressed data: the central directory stays valid."""
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo(f"{SUBTREE}/batched.py")
    data = bytearray(wheel.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 20
    data[start : start + 16] = bytes(16)
    wheel.write_bytes(bytes(data))
    return wheel


def declare_size(wheel: Path, size: int, member: str = f"{SUBTREE}/batched.py") -> Path:
    """Make `member`'s central directory entry declare `size` inflated bytes; its data stays as it is.

    2 GiB declared is what a 2 MB member of zeros inflates to, without a byte of it allocated here;
    a size below the truth is a member that inflates past what it declares."""
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo(member)
        entry = archive.start_dir  # the central directory's first entry
    data = bytearray(wheel.read_bytes())
    while True:  # the central directory entry of batched.py (name at +46, its length at +28)
        name_len = int.from_bytes(data[entry + 28 : entry + 30], "little")
        if data[entry + 46 : entry + 46 + name_len] == info.filename.encode():
            break
        entry = data.index(b"PK\x01\x02", entry + 4)
    data[entry + 24 : entry + 28] = size.to_bytes(4, "little")
    wheel.write_bytes(bytes(data))
    return wheel


def wheel_source(kind: str, files: dict[str, bytes], tmp: Path) -> str:
    path = tmp / f"vllm-{VERSION}-cp38-abi3-linux_x86_64.whl"
    if kind == "good":
        make_wheel(path, files, VERSION)
    elif kind == "dotdot":
        make_wheel(path, files, VERSION, [(f"{SUBTREE}/{CLIMB}ESCAPED.py", b"print('escaped')\n")])
    elif kind == "absolute":
        make_wheel(path, files, VERSION, [(f"{SUBTREE}/{tmp.parent}/ESCAPED_ABS.py", b"print('escaped')\n")])
    elif kind == "symlink":
        make_wheel(path, files, VERSION, [_symlink_member("secret.py", "/etc/passwd")])
    elif kind == "no-metadata":
        make_wheel(path, files, None)
    elif kind == "other-version":
        make_wheel(path, files, OTHER_VERSION)
    elif kind == "corrupt":
        _corrupt(make_wheel(path, files, VERSION))
    elif kind == "control-name":
        make_wheel(path, files, VERSION, [(f"{SUBTREE}/a\x1b[31mb.py", b"print('red')\n")])
    elif kind == "long-name":
        make_wheel(path, files, VERSION, [(f"{SUBTREE}/{'a' * 300}.py", b"print('long')\n")])
    elif kind == "declares-huge":
        declare_size(make_wheel(path, files, VERSION), 2 << 30)
    elif kind == "inflates-past-declared":
        declare_size(make_wheel(path, files, VERSION), 16)
    return f"wheel:{path}"


def dir_source(kind: str, files: dict[str, bytes], tmp: Path) -> str:
    root = tmp / "vllm-tree"
    tmp.mkdir(parents=True, exist_ok=True)
    secret = tmp / "secret.txt"
    secret.write_text("SECRET outside the subtree\n")
    make_dir(root, files, None if kind == "no-version" else OTHER_VERSION if kind == "other-version" else VERSION)
    subtree = root / SUBTREE
    if kind == "file-link":
        (subtree / "secret.py").symlink_to(secret)
    elif kind == "replaced-by-link":
        (subtree / "batched.py").unlink()
        (subtree / "batched.py").symlink_to(secret)
    elif kind == "dir-link":
        outside = tmp / "outside"
        outside.mkdir()
        (outside / "x.py").write_text("print('x')\n")
        (subtree / "extra").symlink_to(outside, target_is_directory=True)
    elif kind == "subtree-link":
        moved = tmp / "elsewhere"
        (root / "vllm" / "model_executor").rename(moved)
        (root / "vllm" / "model_executor").symlink_to(moved, target_is_directory=True)
    elif kind == "version-link":
        (root / "vllm" / "_version.py").unlink()
        (tmp / "version.py").write_bytes(version_file(VERSION))
        (root / "vllm" / "_version.py").symlink_to(tmp / "version.py")
    return f"dir:{root}"
