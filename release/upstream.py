"""Read the pristine prepare_finalize subtree of one vLLM tag from a source.

Sources (`--from`): `git+URL`, `git:PATH`, `dir:PATH`, `wheel:PATH`, `pypi`. Only the
subtree is ever read: wheels are opened as zip archives (one member at a time, the
244 MB release wheel is never unpacked), git sources are read with `ls-tree` and
`cat-file` from a shallow, blob-less fetch (no checkout, no work tree).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from release.errors import SourceError, ToolMissingError, UnknownTagError
from release.layout import UPSTREAM_SUBTREE
from release.model import file_sha256, sha256_hex, version_of_tag

DEFAULT_GIT_URL = "https://github.com/vllm-project/vllm.git"
DEFAULT_SOURCE = f"git+{DEFAULT_GIT_URL}"
FLASHINFER_RE = re.compile(r"^flashinfer-python\s*(?P<spec>[=<>!~][^;#\s]*)", re.M | re.I)


@dataclass
class UpstreamTree:
    """One tag's pristine subtree and where it came from."""

    tag: str
    source: str
    files: dict[str, bytes]
    flashinfer: str = ""
    wheel: str = ""
    wheel_sha256: str = ""
    commit: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def file_hashes(self) -> dict[str, str]:
        return {name: sha256_hex(data) for name, data in sorted(self.files.items())}


def cache_dir() -> Path:
    """Where release wheels are kept between runs (CI may keep it; nothing breaks without it)."""
    configured = os.environ.get("VLLM_FUSED_MOE_CACHE")
    base = Path(configured) if configured else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vllm-fused-moe"
    return base / "wheels"


def fetch(tag: str, source: str) -> UpstreamTree:
    version_of_tag(tag)
    kind, _, rest = source.partition(":")
    if source == "pypi":
        wheel = pypi_wheel(tag)
        return read_wheel(tag, wheel, source_label="pypi")
    if kind == "wheel" and rest:
        return read_wheel(tag, Path(rest), source_label=source)
    if kind == "dir" and rest:
        return read_dir(tag, Path(rest), source)
    if kind == "git" and rest:
        return read_git(tag, rest, source)
    if kind == "git+http" or kind == "git+https" or kind == "git+file" or kind == "git+ssh":
        return read_git(tag, source.removeprefix("git+"), source)
    raise SourceError(f"unknown source {source!r}")


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
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--progress-bar", "on", "--dest", str(target), f"vllm=={version}"],
        stdout=sys.stderr, stderr=subprocess.PIPE, text=True, check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-2000:])
        if "No matching distribution" in proc.stderr or "Could not find a version" in proc.stderr:
            raise UnknownTagError(f"no vLLM release {version} on the package index")
        raise SourceError(f"pip could not download vllm=={version} (exit {proc.returncode})",
                          hint="check the network to the package index, or pass --from wheel:PATH")
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
    version = version_of_tag(tag)
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile:
        raise SourceError(f"{wheel} is not a wheel (not a zip archive)") from None
    with archive:
        prefix = UPSTREAM_SUBTREE + "/"
        files = {
            info.filename[len(prefix):]: archive.read(info)
            for info in archive.infolist()
            if info.filename.startswith(prefix) and not info.is_dir()
            and "__pycache__" not in info.filename
        }
        metadata_name = next((n for n in archive.namelist() if re.match(r"^[^/]+\.dist-info/METADATA$", n)), None)
        metadata = archive.read(metadata_name).decode("utf-8", "replace") if metadata_name else ""
    wheel_version = _metadata_field(metadata, "Version")
    if wheel_version and wheel_version != version:
        raise SourceError(f"{wheel.name} is vLLM {wheel_version}, not {tag}")
    if not files:
        raise SourceError(f"{wheel.name} has no {UPSTREAM_SUBTREE}/")
    return UpstreamTree(
        tag=tag, source=source_label, files=files,
        flashinfer=_flashinfer_pin(metadata),
        wheel=wheel.name, wheel_sha256=file_sha256(wheel),
    )


def _metadata_field(metadata: str, name: str) -> str:
    match = re.search(rf"^{name}: (.*)$", metadata, re.M)
    return match.group(1).strip() if match else ""


def _flashinfer_pin(requirements_text: str) -> str:
    for line in requirements_text.splitlines():
        line = line.removeprefix("Requires-Dist:").strip()
        match = FLASHINFER_RE.match(line)
        if match and "extra ==" not in line:
            return "flashinfer-python" + match.group("spec")
    return ""


# -------------------------------------------------------------------------- trees


def read_dir(tag: str, root: Path, source: str) -> UpstreamTree:
    subtree = root / UPSTREAM_SUBTREE
    if not subtree.is_dir():
        raise SourceError(f"{root} has no {UPSTREAM_SUBTREE}/", hint="dir:PATH is the root of a tree laid out like vLLM's")
    from release.layout import read_tree

    requirements = root / "requirements" / "cuda.txt"
    pin = _flashinfer_pin(requirements.read_text()) if requirements.is_file() else ""
    return UpstreamTree(tag=tag, source=source, files=read_tree(subtree), flashinfer=pin)


# ---------------------------------------------------------------------------- git


def git(args: list[str], cwd: Path | None = None, check: bool = True, input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, input=input_bytes, capture_output=True, check=False)
    except FileNotFoundError:
        raise ToolMissingError("git is not installed") from None
    if check and proc.returncode != 0:
        raise SourceError(f"git {' '.join(args[:3])} failed: {proc.stderr.decode(errors='replace').strip()[-400:]}")
    return proc


def read_git(tag: str, url_or_path: str, source: str) -> UpstreamTree:
    """Fetch just `tag` (depth 1, no blobs until asked) and read only the subtree's blobs."""
    local = Path(url_or_path)
    if not source.startswith("git+") and not (local / ".git").exists() and not (local / "HEAD").is_file():
        raise SourceError(f"{url_or_path} is not a git repository")
    url = str(local.resolve()) if not source.startswith("git+") else url_or_path
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-git-") as tmp:
        repo = Path(tmp)
        git(["init", "--quiet", "--bare", str(repo)])
        fetched = git(["-C", str(repo), "fetch", "--quiet", "--depth", "1", "--filter=blob:none",
                       "--no-tags", url, f"refs/tags/{tag}:refs/tags/{tag}"], check=False)
        if fetched.returncode != 0:
            message = fetched.stderr.decode(errors="replace")
            if "couldn't find remote ref" in message or "not our ref" in message:
                raise UnknownTagError(f"{source} has no tag {tag}")
            raise SourceError(f"cannot fetch {tag} from {source}: {message.strip()[-300:]}")
        commit = git(["-C", str(repo), "rev-parse", f"refs/tags/{tag}^{{commit}}"]).stdout.decode().strip()
        listing = git(["-C", str(repo), "ls-tree", "-r", "-z", commit, "--", UPSTREAM_SUBTREE + "/"]).stdout
        entries = [entry.split(b"\t", 1) for entry in listing.split(b"\0") if entry]
        if not entries:
            raise SourceError(f"{source} at {tag} has no {UPSTREAM_SUBTREE}/")
        files: dict[str, bytes] = {}
        for meta, path in entries:
            blob = meta.split()[2].decode()
            files[path.decode()[len(UPSTREAM_SUBTREE) + 1:]] = git(["-C", str(repo), "cat-file", "blob", blob]).stdout
        cuda = git(["-C", str(repo), "show", f"{commit}:requirements/cuda.txt"], check=False)
        pin = _flashinfer_pin(cuda.stdout.decode(errors="replace")) if cuda.returncode == 0 else ""
    return UpstreamTree(tag=tag, source=source, files=files, flashinfer=pin, commit=commit)
