"""Read the subtree out of a vLLM release wheel (a local file or the pypi cache)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

from release.core.errors import SourceError, UnknownTagError
from release.core.hashing import file_sha256
from release.core.layout import UPSTREAM_SUBTREE
from release.core.versions import version_of_tag
from release.pristine import safe
from release.pristine.tree import UpstreamTree, _flashinfer_pin


def cache_dir() -> Path:
    """Where release wheels are kept between runs (CI may keep it; nothing breaks without it)."""
    configured = os.environ.get("VLLM_FUSED_MOE_CACHE")
    base = (
        Path(configured)
        if configured
        else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vllm-fused-moe"
    )
    return base / "wheels"


# ------------------------------------------------------------------------- wheels


def pypi_wheel(tag: str) -> Path:
    """The release wheel of `tag`, from the cache or downloaded once with pip."""
    version = version_of_tag(tag)
    target = cache_dir() / version
    cached = _wheels_for(target, version)
    if cached:
        return cached[0]
    target.mkdir(parents=True, exist_ok=True)
    print(f"downloading vllm=={version} (about 240 MB) into {target} ...", file=sys.stderr, flush=True)
    # pip draws its own progress bar on a terminal; --progress-bar on forces it in CI logs too.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--progress-bar",
            "on",
            "--dest",
            str(target),
            f"vllm=={version}",
        ],
        stdout=sys.stderr,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-2000:])
        if "No matching distribution" in proc.stderr or "Could not find a version" in proc.stderr:
            raise UnknownTagError(f"no vLLM release {version} on the package index")
        raise SourceError(
            f"pip could not download vllm=={version} (exit {proc.returncode})",
            hint="check the network to the package index, or pass --from wheel:PATH",
        )
    found = _wheels_for(target, version)
    if not found:
        raise SourceError(f"pip reported success but left no vllm {version} wheel in {target}")
    return found[0]


def _wheels_for(directory: Path, version: str) -> list[Path]:
    # Release wheels may carry a build tag, e.g. vllm-0.21.0-1-cp38-abi3-....whl.
    pattern = re.compile(rf"^vllm-{re.escape(version)}(-\d+)?-.*\.whl$")
    return sorted(p for p in directory.glob("vllm-*.whl") if pattern.match(p.name)) if directory.is_dir() else []


def read_wheel(tag: str, wheel: Path, source_label: str) -> UpstreamTree:
    if not wheel.is_file():
        raise SourceError(f"no wheel at {wheel}")
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile:
        raise SourceError(f"{wheel} is not a wheel (not a zip archive)") from None
    with archive:
        prefix = UPSTREAM_SUBTREE + "/"
        try:
            files = {
                info.filename[len(prefix) :]: archive.read(info)
                for info in archive.infolist()
                if info.filename.startswith(prefix)
                and not info.is_dir()
                and "__pycache__" not in info.filename
                and safe.check_wheel_member(info, wheel.name)
            }
            metadata_name = next((n for n in archive.namelist() if re.match(r"^[^/]+\.dist-info/METADATA$", n)), None)
            metadata_bytes = archive.read(metadata_name) if metadata_name else None
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
            raise SourceError(f"{wheel.name}: its member data is corrupt ({exc})") from None
    metadata = safe.prove_wheel_version(metadata_bytes, tag, wheel.name)
    if not files:
        raise SourceError(f"{wheel.name} has no {UPSTREAM_SUBTREE}/")
    return UpstreamTree(
        tag=tag,
        source=source_label,
        files=files,
        flashinfer=_flashinfer_pin(metadata),
        wheel=wheel.name,
        wheel_sha256=file_sha256(wheel),
    )
