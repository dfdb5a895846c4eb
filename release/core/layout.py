"""Where things live in a checkout; one object so tests can point the tooling at a copy."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import NotACheckoutError, UnsafeSourceError

# The upstream path of the subtree we vendor; patches are written against it.
UPSTREAM_SUBTREE = "vllm/model_executor/layers/fused_moe/prepare_finalize"
UPSTREAM_PACKAGE = UPSTREAM_SUBTREE.replace("/", ".")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# What vendor/vllm_fused_moe/ holds besides the vendored subtree, and nothing else: the licence the
# vendored files come under and the notice that names them (both travel with them into the wheel),
# and the two pins. Our own runtime code is under release/overlay/runtime/ (docs/architecture.md).
# The overlay package as the wheel installs it, and the build facts `release build` writes into it
# (docs/architecture.md, "Who owns what"). The runtime names the same file beside itself
# (runtime/vllm_fused_moe/_meta.py BUILD_INFO): it ships in the wheel, where release/ is not.
OVERLAY_PACKAGE = "vllm_fused_moe"
BUILD_INFO_NAME = "_build_info.json"
BUILD_INFO_MEMBER = f"{OVERLAY_PACKAGE}/{BUILD_INFO_NAME}"  # its path inside a wheel
BESIDE_SUBTREE = ("LICENSE", "NOTICE", "UPSTREAM.toml", "VERIFIED.toml")


@dataclass(frozen=True)
class Layout:
    root: Path

    @classmethod
    def default(cls) -> Layout:
        """The checkout this package lies in (`python -m release`, an editable install); for an installed
        `vllm-fused-moe-release`, the checkout that holds the working directory, as git finds its own."""
        if cls(PROJECT_ROOT).is_checkout():
            return cls(PROJECT_ROOT)
        here = Path.cwd()
        for directory in (here, *here.parents):
            if cls(directory).is_checkout():
                return cls(directory)
        raise NotACheckoutError(f"{here} is not inside a checkout of vllm-fused-moe (no vendor/ and patches/)")

    def is_checkout(self) -> bool:
        return (self.vendored / "UPSTREAM.toml").is_file() and (self.root / "patches").is_dir()

    @property
    def vendored(self) -> Path:
        """Upstream's files and their pins: the vendored subtree, BESIDE_SUBTREE, nothing of ours."""
        return self.root / "vendor" / OVERLAY_PACKAGE

    @property
    def runtime(self) -> Path:
        """Our code of the wheel's top level, named as installed: the .pth's module and `vllm_fused_moe/`."""
        return self.root / "release" / "overlay" / "runtime"

    @property
    def runtime_package(self) -> Path:
        return self.runtime / OVERLAY_PACKAGE

    @property
    def subtree(self) -> Path:
        return self.vendored / "prepare_finalize"

    @property
    def upstream_toml(self) -> Path:
        return self.vendored / "UPSTREAM.toml"

    @property
    def verified_toml(self) -> Path:
        return self.vendored / "VERIFIED.toml"

    @property
    def patches(self) -> Path:
        return self.root / "patches"

    @property
    def series(self) -> Path:
        return self.patches / "series"

    @property
    def train(self) -> Path:
        return self.patches / "train.toml"

    @property
    def retired(self) -> Path:
        return self.patches / "retired"

    @property
    def lines(self) -> Path:
        return self.patches / "lines.toml"

    @property
    def affected_json(self) -> Path:
        # Our scan's finding, not upstream's file: beside the doctor that reads it, in the checkout as in
        # every wheel.
        return self.runtime_package / "affected-releases.json"

    @property
    def affected_md(self) -> Path:
        return self.root / "docs" / "affected-releases.md"

    @property
    def work(self) -> Path:
        # Half-done rebases live here so a conflict never touches vendor/ or patches/.
        return self.root / ".work"

    def vendor_files(self) -> dict[str, bytes]:
        """The vendored subtree as {path relative to the subtree: bytes}, caches left out."""
        return read_tree(self.subtree)


def read_tree(directory: Path) -> dict[str, bytes]:
    """Regular files only: a symbolic link is never followed (`check` reports it as such)."""
    files: dict[str, bytes] = {}
    if not directory.is_dir():
        return files
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if path.is_symlink() or any((directory / p).is_symlink() for p in rel.parents if p.parts):
            continue
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix != ".pyc":
            files[rel.as_posix()] = path.read_bytes()
    return files


def write_files(directory: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        parts = name.split("/")
        # Names come from sources that were checked (release.pristine.safe); this is the last line of defence.
        if name.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in name:
            raise UnsafeSourceError(f"refusing to write {name!r} under {directory}: not a plain relative path")
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def writable_dir_problem(path: Path) -> str | None:
    """Why `path` cannot be (created as) a writable directory, or None; creates nothing.

    Checked before a command changes anything, so that an output that cannot be written is
    bad input (exit 2, nothing changed) instead of a failure after the work is done.
    """
    probe = path.absolute()
    while not probe.exists() and not probe.is_symlink():
        if probe.parent == probe:
            return f"no part of {path} exists"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is {'a broken link' if not probe.exists() else 'not a directory'}"
    # Root may write anywhere; a directory without any write bit still means "leave this alone".
    if not os.access(probe, os.W_OK | os.X_OK) or not probe.stat().st_mode & 0o222:
        return f"{probe} is not writable"
    return None
