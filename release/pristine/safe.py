"""No source is trusted: what every reader of upstream code must check, in one place.

`fetch()` (release.pristine.sources) applies `check_tree` to every tree a source returns,
before anything is written: names are plain relative paths inside the subtree (no `..`,
no `.`, no absolute names, no backslashes, no name that is both a file and a directory).
What only a reader can see is checked where it reads, through the functions here:

- wheel: `check_wheel_names` refuses a bad name of any member, read or not (no absolute names,
  `..` or backslashes anywhere in the archive); `check_wheel_member` refuses members stored as
  symbolic links;
  `prove_wheel_version` requires .dist-info/METADATA and its Version to be the tag.
- dir: `read_regular_tree` walks without following links and refuses any link or special
  file; `read_regular_file` reads one file the same way; `prove_dir_version` reads the
  version that setuptools-scm wrote (vllm/_version.py) or a static pyproject version.
- git: `check_git_entries` refuses symbolic links (mode 120000) and submodules (160000);
  the tag fetched is the proof of the version.

Every refusal is an UnsafeSourceError or a VersionProofError: exit 2, one line.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from release.core.errors import SourceError, UnsafeSourceError, VersionProofError
from release.core.files import read_regular
from release.core.git import TreeEntry
from release.core.layout import UPSTREAM_SUBTREE
from release.core.parse import parse_toml
from release.core.text import MAX_COMPONENT_BYTES, control_character, described
from release.core.versions import InvalidVersion, package_version, version_of_tag
from release.pristine.metadata import CoreMetadata, MetadataError, metadata_flashinfer_pin, read_metadata

# A module of vLLM's subtree is tens of kB; a file of a dir: source this large is no source code.
SOURCE_FILE_LIMIT = 64 << 20

# ------------------------------------------------------------------ names


def name_problem(name: str) -> str | None:
    """Why `name` is not a plain relative path inside a directory, or None."""
    if not name:
        return "an empty name"
    if "\0" in name or "\\" in name:
        return "a NUL or a backslash in the name"
    control = control_character(name)
    if control is not None:
        return f"the control character {described(control)} in the name"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "an absolute name"
    parts = name.split("/")
    if ".." in parts:
        return "a `..` component"
    if any(part in ("", ".") for part in parts):
        return "an empty or `.` component"
    if any(len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES for part in parts):
        return f"a component longer than {MAX_COMPONENT_BYTES} bytes, more than a file system takes"
    return None


def check_names(names: Iterable[str], source: str) -> None:
    """Every name is a plain relative path, and none is both a file and a directory."""
    files = set()
    for name in names:
        problem = name_problem(name)
        if problem:
            raise UnsafeSourceError(
                f"{source}: {UPSTREAM_SUBTREE}/{ascii(name)[:120]} has {problem}; refusing the source"
            )
        files.add(name)
    for name in files:
        parts = name.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in files:
                raise UnsafeSourceError(f"{source}: {'/'.join(parts[:depth])!r} is both a file and a directory")


def check_tree(files: Mapping[str, bytes], source: str) -> None:
    check_names(files, source)


# ------------------------------------------------------------------ wheels


def check_wheel_member(info: zipfile.ZipInfo, source: str) -> bool:
    """Refuse a member of the subtree that is a link (unix mode in the external attributes); True otherwise."""
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise UnsafeSourceError(f"{source}: member {info.filename!r} is a symbolic link; refusing the wheel")
    if mode and not (stat.S_ISREG(mode) or stat.S_IFMT(mode) == 0):
        raise UnsafeSourceError(f"{source}: member {info.filename!r} is not a regular file; refusing the wheel")
    problem = name_problem(info.filename)
    if problem:
        raise UnsafeSourceError(f"{source}: member {info.filename!r} has {problem}; refusing the wheel")
    return True


def check_wheel_names(names: Iterable[str], source: str) -> None:
    """Every member of the wheel, read or not, has a plain relative name (no absolute, `..` or backslash)."""
    for name in names:
        problem = name_problem(name)
        if problem:
            raise UnsafeSourceError(f"{source}: member {ascii(name)[:120]} has {problem}; refusing the wheel")


def prove_wheel_version(metadata: bytes | None, tag: str, source: str) -> CoreMetadata:
    """The wheel's METADATA, after proving its Version is `tag`."""
    return prove_wheel_release(metadata, version_of_tag(tag), source, tag)


def prove_wheel_release(metadata: bytes | None, version: str, source: str, tag: str = "") -> CoreMetadata:
    """The wheel's METADATA, after proving its Version is `version` (any PEP 440 release, for scan)."""
    tag = tag or version
    if metadata is None:
        raise VersionProofError(f"{source} has no .dist-info/METADATA, so it cannot prove it is vLLM {tag}")
    try:
        text = metadata.decode("utf-8")
    except UnicodeDecodeError:
        raise VersionProofError(f"{source}: .dist-info/METADATA is not UTF-8 text") from None
    parsed = read_metadata(text)
    found = parsed.version
    if not found:
        raise VersionProofError(f"{source}: .dist-info/METADATA has no Version, so it cannot prove it is vLLM {tag}")
    if not same_release(found, version):
        raise VersionProofError(f"{source} is vLLM {found}, not {tag}")
    return parsed


def wheel_flashinfer_pin(metadata: CoreMetadata, source: str) -> str:
    """The FlashInfer pin of a release wheel's METADATA (release.pristine.metadata says which counts)."""
    try:
        return metadata_flashinfer_pin(metadata)
    except MetadataError as exc:
        raise SourceError(f"{source}: .dist-info/METADATA: {exc}") from None


def same_release(found: str, version: str) -> bool:
    """Is `found` the release `version`? A local label (+cu129) is the same source; .devN is not."""
    try:
        return package_version(found).public == package_version(version).public
    except InvalidVersion:
        return False


# ------------------------------------------------------------------ dir:


def check_no_links(root: Path, relative: str, source: str) -> Path:
    """`root/relative`, after proving no component below `root` is a link."""
    path = root
    for part in relative.split("/"):
        path = path / part
        if path.is_symlink():
            raise UnsafeSourceError(f"{source}: {path} is a symbolic link; a dir: source is never read through links")
    return path


def read_regular_tree(directory: Path, source: str) -> dict[str, bytes]:
    """Every regular file below `directory` ({relative posix path: bytes}); a link or special file is refused."""
    files: dict[str, bytes] = {}
    pending = [(directory, "")]
    while pending:
        current, prefix = pending.pop()
        with os.scandir(current) as entries:
            for entry in entries:
                name = prefix + entry.name
                if entry.is_symlink():
                    raise UnsafeSourceError(
                        f"{source}: {Path(entry.path)} is a symbolic link; links are never followed or vendored"
                    )
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        pending.append((Path(entry.path), name + "/"))
                elif entry.is_file(follow_symlinks=False):
                    if not entry.name.endswith(".pyc"):
                        files[name] = read_regular_file(Path(entry.path), source)
                else:
                    raise UnsafeSourceError(f"{source}: {Path(entry.path)} is not a regular file")
    return dict(sorted(files.items()))


def read_regular_file(path: Path, source: str) -> bytes:
    """The bytes of `path`, opened without following a link (O_NOFOLLOW), so a swapped-in link fails;
    a FIFO, a device or a file over SOURCE_FILE_LIMIT is refused (release.core.files)."""
    return read_regular(path, SOURCE_FILE_LIMIT, follow_links=False, error=UnsafeSourceError, what=f"{source}: ")


# setuptools-scm writes `__version__ = version = '0.20.0'` into vllm/_version.py (top level, not indented).
VERSION_FILE_RE = re.compile(r"""^(?:__version__|version)\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.M)


def prove_dir_version(root: Path, tag: str, source: str) -> str:
    """Where `root` says it is `tag` (for the report); refuses a tree that says another version or nothing."""
    version = version_of_tag(tag)
    looked = []
    for relative in ("vllm/_version.py", "vllm/version.py"):
        path = root / relative
        looked.append(relative)
        if not os.path.lexists(path):
            continue
        check_no_links(root, relative, source)
        match = VERSION_FILE_RE.search(read_regular_file(path, source).decode("utf-8", "replace"))
        if match:
            return _compare(match.group(1), version, tag, f"{source} ({relative})")
    pyproject = root / "pyproject.toml"
    looked.append("pyproject.toml [project] version")
    if os.path.lexists(pyproject):
        check_no_links(root, "pyproject.toml", source)
        try:
            text = read_regular_file(pyproject, source).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SourceError(f"{source}: pyproject.toml is not valid TOML ({exc})") from None
        project = parse_toml(text, where=f"{source}: pyproject.toml", error=SourceError).get("project", {})
        if isinstance(project, dict) and isinstance(project.get("version"), str):
            return _compare(project["version"], version, tag, f"{source} (pyproject.toml)")
    raise VersionProofError(f"{source} cannot prove it is vLLM {tag}: no version in {', '.join(looked)}")


def _compare(found: str, version: str, tag: str, where: str) -> str:
    if not same_release(found, version):
        raise VersionProofError(f"{where} says vLLM {found}, not {tag}")
    return found


# ------------------------------------------------------------------ git


def check_git_entries(entries: Iterable[TreeEntry], source: str) -> None:
    """Only plain blobs (mode 100644 or 100755) below the subtree: no links, no submodules."""
    for entry in entries:
        if entry.mode == "120000":
            raise UnsafeSourceError(f"{source}: {entry.path} is a symbolic link (mode 120000); refusing the tag")
        if entry.mode == "160000" or entry.kind == "commit":
            raise UnsafeSourceError(f"{source}: {entry.path} is a submodule (mode 160000); refusing the tag")
        if entry.kind != "blob" or entry.mode not in ("100644", "100755"):
            raise UnsafeSourceError(f"{source}: {entry.path} is a {entry.kind} of mode {entry.mode}, not a file")
