"""Add wheels to a PEP 503 "simple" index directory that pip reads with --index-url file://...

Layout: INDEX/simple/index.html lists the projects; INDEX/simple/<project>/ holds the wheels
and an index.html linking each as `<file>#sha256=<hex>` with `data-requires-python`.
The files on disk are the truth; both pages are regenerated from them on every publish.

A publish is all-or-nothing: every check (readable wheels, writable and consistent index,
no name clash) runs before the first write; wheels go in under a temporary name and are
renamed into place; the pages are replaced last, each by an atomic rename.
"""

from __future__ import annotations

import html
import os
import re
import stat
import urllib.parse
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from release.core.errors import BadWheelError, IndexClashError, IndexCorruptError, IndexNotWritableError, PublishError
from release.core.hashing import file_sha256

TMP_PREFIX = ".publish-"
HREF_RE = re.compile(r'<a href="(?P<href>[^"#]+)#sha256=(?P<sha>[0-9a-f]{64})"')


@dataclass(frozen=True)
class Wheel:
    path: Path
    project: str  # PEP 503 normalised name
    version: Version
    sha256: str
    requires_python: str

    @property
    def name(self) -> str:
        return self.path.name


def inspect_wheel(path: Path) -> Wheel:
    """A wheel's identity, checked against its own metadata (a renamed file is refused)."""
    if not path.is_file():
        raise BadWheelError(f"{path} is not a file")
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise BadWheelError(f"{path.name} is not a wheel file name ({exc})") from None
    try:
        with zipfile.ZipFile(path) as archive:
            metadata_names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(metadata_names) != 1:
                raise BadWheelError(f"{path.name} has {len(metadata_names)} .dist-info/METADATA files, expected one")
            headers = HeaderParser().parsestr(archive.read(metadata_names[0]).decode("utf-8"))
    except zipfile.BadZipFile:
        raise BadWheelError(f"{path.name} is not a zip archive") from None
    meta_name, meta_version = headers.get("Name", ""), headers.get("Version", "")
    if canonicalize_name(meta_name) != name or Version(meta_version) != version:
        raise BadWheelError(
            f"{path.name} says it is {meta_name} {meta_version} inside: its name clashes with its metadata"
        )
    return Wheel(path, name, version, file_sha256(path), headers.get("Requires-Python", "") or "")


@dataclass(frozen=True)
class Outcome:
    added: list[str]
    already: list[str]


def publish(wheels: list[Path], index: Path) -> Outcome:
    candidates = [inspect_wheel(path) for path in wheels]
    simple = index / "simple"
    for project in sorted({w.project for w in candidates}):
        check_consistent(simple / project)
    added, already = _plan(candidates, simple)
    if added:  # a rerun with nothing new writes nothing, so it also works on a read-only index
        _check_writable(index, simple, {w.project for w in added})
        _apply(added, simple)
    return Outcome([w.name for w in added], [w.name for w in already])


def _check_writable(index: Path, simple: Path, projects: set[str]) -> None:
    # Root may write anywhere; a directory without write bits still means "leave this alone".
    for directory in [index, simple, *(simple / p for p in sorted(projects))]:
        if directory.exists():
            mode = directory.stat().st_mode
            if not os.access(directory, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
                raise IndexNotWritableError(f"{directory} is read-only; nothing was published")
        elif directory == index and not directory.parent.is_dir():
            raise IndexNotWritableError(f"{directory.parent} does not exist; nothing was published")


def check_consistent(project_dir: Path) -> None:
    """The project page lists exactly the wheels on disk, with their sha256; no leftovers."""
    if not project_dir.exists():
        return
    page = project_dir / "index.html"
    on_disk = {p.name for p in project_dir.iterdir() if p.name != "index.html"}
    leftovers = sorted(n for n in on_disk if n.startswith(TMP_PREFIX))
    if leftovers:
        raise IndexCorruptError(f"{project_dir} holds leftovers of an interrupted publish: {', '.join(leftovers)}")
    if not page.is_file():
        if on_disk:
            raise IndexCorruptError(f"{project_dir} has files but no index.html")
        return
    listed = {urllib.parse.unquote(m.group("href")): m.group("sha") for m in HREF_RE.finditer(page.read_text("utf-8"))}
    if set(listed) != on_disk:
        missing, unlisted = sorted(set(listed) - on_disk), sorted(on_disk - set(listed))
        raise IndexCorruptError(
            f"{page} does not match the directory (listed but missing: {missing or 'none'}; "
            f"present but unlisted: {unlisted or 'none'})"
        )
    for name, sha in sorted(listed.items()):
        if file_sha256(project_dir / name) != sha:
            raise IndexCorruptError(f"{project_dir / name} does not have the sha256 its index.html lists")


def _plan(candidates: list[Wheel], simple: Path) -> tuple[list[Wheel], list[Wheel]]:
    added: dict[str, Wheel] = {}
    already: list[Wheel] = []
    for wheel in candidates:
        existing = simple / wheel.project / wheel.name
        if existing.exists():
            if file_sha256(existing) != wheel.sha256:
                raise IndexClashError(
                    f"{existing} is already published with different bytes than {wheel.path}; nothing was published"
                )
            already.append(wheel)
        elif wheel.name in added:
            if added[wheel.name].sha256 != wheel.sha256:
                raise IndexClashError(f"two different wheels named {wheel.name} were given; nothing was published")
        else:
            added[wheel.name] = wheel
    return list(added.values()), already


def _apply(added: list[Wheel], simple: Path) -> None:
    created: list[Path] = []
    temporaries: list[Path] = []
    try:
        for directory in [simple.parent, simple, *(simple / p for p in sorted({w.project for w in added}))]:
            if not directory.exists():
                directory.mkdir()
                created.append(directory)
        renames: list[tuple[Path, Path]] = []
        for wheel in added:
            temporary = simple / wheel.project / f"{TMP_PREFIX}{wheel.name}"
            temporaries.append(temporary)
            _copy(wheel.path, temporary)
            if file_sha256(temporary) != wheel.sha256:
                raise PublishError(f"{wheel.path} changed while it was being published")
            renames.append((temporary, simple / wheel.project / wheel.name))
        projects = sorted({w.project for w in added})
        pages = {
            simple / p / "index.html": project_page(simple / p, p, [w for w in added if w.project == p])
            for p in projects
        }
        pages[simple / "index.html"] = root_page(simple, set(projects))
        for page, text in pages.items():
            temporary = page.with_name(f"{TMP_PREFIX}{page.name}")
            temporaries.append(temporary)
            temporary.write_text(text, encoding="utf-8")
            renames.append((temporary, page))
    except OSError as exc:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)
        for directory in reversed(created):
            if directory.exists() and not any(directory.iterdir()):
                directory.rmdir()
        raise PublishError(f"publishing into {simple.parent} failed: {exc}") from None
    # Everything is written; only renames are left: wheels first, so no page ever links a missing file.
    for temporary, final in renames:
        temporary.replace(final)


def _copy(source: Path, target: Path) -> None:
    with source.open("rb") as reader, target.open("xb") as writer:
        while block := reader.read(1 << 22):
            writer.write(block)
        writer.flush()
        os.fsync(writer.fileno())


def project_page(project_dir: Path, project: str, new: list[Wheel]) -> str:
    """The page of one project: earlier files (read back from disk) and the new ones, newest version last."""
    known = {w.name: w for w in new}
    if project_dir.is_dir():
        for path in project_dir.glob("*.whl"):
            if path.name not in known and not path.name.startswith(TMP_PREFIX):
                known[path.name] = inspect_wheel(path)
    rows = []
    for wheel in sorted(known.values(), key=lambda w: (w.version, w.name)):
        href = f"{urllib.parse.quote(wheel.name)}#sha256={wheel.sha256}"
        requires = f' data-requires-python="{html.escape(wheel.requires_python)}"' if wheel.requires_python else ""
        rows.append(f'    <a href="{href}"{requires}>{html.escape(wheel.name)}</a><br/>')
    return _page(f"Links for {project}", rows)


def root_page(simple: Path, new_projects: set[str]) -> str:
    projects = set(new_projects)
    if simple.is_dir():
        projects |= {p.name for p in simple.iterdir() if p.is_dir() and not p.name.startswith(".")}
    rows = [f'    <a href="{html.escape(p)}/">{html.escape(p)}</a><br/>' for p in sorted(projects)]
    return _page("Simple index", rows)


def _page(title: str, rows: list[str]) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html>",
            "  <head>",
            '    <meta name="pypi:repository-version" content="1.0">',
            f"    <title>{html.escape(title)}</title>",
            "  </head>",
            "  <body>",
            f"    <h1>{html.escape(title)}</h1>",
            *rows,
            "  </body>",
            "</html>",
            "",
        ]
    )
