"""The index we write: `publish` adds our wheels to a PEP 503 directory (pristine/index.py reads PyPI's).

A "simple" index directory that pip reads with --index-url file://...

Layout: INDEX/simple/index.html lists the projects; INDEX/simple/<project>/ holds the wheels
and an index.html linking each as `<file>#sha256=<hex>` with `data-requires-python`.
INDEX/requirements/vllm-<X>.txt pins, for each vLLM release X, our newest wheel for X by its
version and its sha256: `pip install -r` of it turns on pip's hash-checking mode, which refuses
every other file from every index and find-links the user's configuration adds (the install
the docs give, docs/overlay.md "Install"). The files on disk are the truth; the pages and the
requirements files are regenerated from them on every publish.

A publish is all-or-nothing: every check (readable wheels of the one project the command
publishes, writable and consistent index, no name clash) runs before the first write; wheels go
in under a temporary name and are renamed into place; the pages and then the requirements
files are replaced last, each by an atomic rename, so none ever names a wheel not in place.
A wheel whose files equal those of the wheel the index already holds for its vLLM release,
apart from build information (the commit and time it was built from), is skipped and said so:
it would publish a release that changes nothing (as `twine upload --skip-existing` skips). One
whose files differ is refused unless its version is above the newest the index holds for that
release: the requirements file pins the newest, so a lower level would never reach a user.

Longer than 500 lines on purpose: the order of its checks, writes and renames is the crash guarantee
docs/guarantees.md states, and one module keeps that order readable top to bottom.
"""

from __future__ import annotations

import hashlib
import html
import io
import os
import re
import shutil
import stat
import urllib.parse
import zipfile
import zlib
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from release.core.errors import (
    BadWheelError,
    DirtyWheelError,
    ForeignProjectError,
    IndexClashError,
    IndexCorruptError,
    IndexNotWritableError,
    PackageIndexError,
    PatchLevelNotAboveError,
    PublishError,
)
from release.core.faults import fault_point
from release.core.files import WHEEL_LIMIT, open_regular, read_member
from release.core.hashing import file_sha256
from release.core.journal import sync_dir, write_atomic
from release.core.layout import writable_dir_problem
from release.core.lock import INDEX_LOCK, index_lock
from release.core.versions import InvalidVersion, Pep440Version, package_version
from release.overlay.build import PROJECT
from release.overlay.shipped import shipped_digest
from release.pristine.index import SHA256_RE, parse_project_page
from release.pristine.metadata import read_metadata

TMP_PREFIX = ".publish-"
REQUIREMENTS = "requirements"


@dataclass(frozen=True)
class Wheel:
    path: Path
    project: str  # PEP 503 normalised name
    version: Pep440Version
    sha256: str
    requires_python: str
    metadata_version: str = ""  # the Version header as written, which METADATA repeats in its text

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def vllm(self) -> str:
        """The vLLM release an overlay wheel is for: its version without our `+fm.N` label."""
        return self.version.public


def inspect_wheel(path: Path) -> Wheel:
    """A wheel's identity, checked against its own metadata (a renamed file is refused)."""
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise BadWheelError(f"{path.name} is not a wheel file name ({exc})") from None
    try:
        with open_wheel(path) as handle, zipfile.ZipFile(handle) as archive:
            metadata_names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(metadata_names) != 1:
                raise BadWheelError(f"{path.name} has {len(metadata_names)} .dist-info/METADATA files, expected one")
            raw = read_member(archive, metadata_names[0], error=BadWheelError, what=f"{path.name}: ")
            handle.seek(0)
            sha256 = hashlib.file_digest(handle, "sha256").hexdigest()
    except zipfile.BadZipFile as exc:
        what = "is not a zip archive" if "not a zip" in str(exc).lower() else f"has corrupt data ({exc})"
        raise BadWheelError(f"{path.name} {what}") from None
    except (zlib.error, EOFError, OSError, ValueError) as exc:
        raise BadWheelError(f"{path.name} has corrupt data ({exc})") from None
    try:
        metadata = read_metadata(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadWheelError(f"{path.name}: its .dist-info/METADATA is not UTF-8 text") from None
    meta_name, meta_version = metadata.name, metadata.version
    try:
        parsed_version = package_version(meta_version)
    except InvalidVersion:
        raise BadWheelError(f"{path.name}: its METADATA Version {meta_version!r} is not a PEP 440 version") from None
    if canonicalize_name(meta_name) != name or parsed_version != version:
        raise BadWheelError(
            f"{path.name} says it is {meta_name} {meta_version} inside: its name clashes with its metadata"
        )
    return Wheel(path, name, version, sha256, metadata.requires_python, meta_version)


def open_wheel(path: Path) -> io.BufferedReader:
    """A wheel to publish, open: a regular file (a link to one is fine) of at most WHEEL_LIMIT bytes.

    `/dev/zero`, a FIFO or a directory named `*.whl` is refused at once (exit 2), before a byte is
    read: zip reading seeks and reads to the end, which a device or a pipe never reaches.
    """
    return open_regular(path, WHEEL_LIMIT, error=BadWheelError)


def is_dirty(version: Pep440Version) -> bool:
    """A version `build --allow-dirty` made: its local label ends in `.dirty` (0.20.0+fm.1.dirty)."""
    return version.local is not None and version.local.split(".")[-1] == "dirty"


def contents_digest(wheel: Wheel) -> str:
    """What the wheel installs, apart from its build information (release.overlay.shipped, which `build` records)."""
    return shipped_digest(wheel.path, wheel.metadata_version)


@dataclass(frozen=True)
class Skipped:
    name: str  # the wheel given
    held: str  # the wheel of the index with the same files
    same_name: bool  # a rebuild of that very release (else: another patch level of the same files)

    def reason(self) -> str:
        what = "a rebuild of it" if self.same_name else "a new patch level that changes nothing"
        return (
            f"the index already holds {self.held} for the same patched files; only build information "
            f"differs (commit, build time{'' if self.same_name else ', version label'}), so {what} is not published"
        )


@dataclass(frozen=True)
class Outcome:
    added: list[str]
    already: list[str]
    repaired: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)  # requirements files written, relative to INDEX_DIR


@dataclass(frozen=True)
class Plan:
    added: list[Wheel]
    already: list[Wheel]
    skipped: list[Skipped]


def publish(wheels: list[Path], index: Path, *, project: str | None = None, allow_dirty: bool = False) -> Outcome:
    """Add `wheels` to the index in `index`, as the `publish` command does when given `project`.

    The command passes ours (`vllm-fused-moe`): a wheel of any other project is refused (users
    install from our index with `--index-url`, so whatever else it held would be installed as if it
    were the real thing), and a wheel whose files equal those of the wheel the index holds for its
    vLLM release is skipped (a release that changes nothing). Without `project` this is the plain
    index writer: any project, every new file name goes in. The tests build indexes with it that
    hold real vLLM release wheels, or two patch levels of one tree to show which one pip picks.
    The command also refuses a dirty build (`build --allow-dirty`) unless `allow_dirty`: its version
    sorts above the clean build of the same patch level, so the requirements file would pin it.
    """
    candidates = _candidates(wheels, project, allow_dirty)
    _plan(candidates, index / "simple", project)  # a clash is refused before anything is made
    created = _make_index_dir(index)
    try:
        # A read-only index cannot be written by anyone we could race with; it is read as it is.
        with index_lock(index) if _writable(index) else nullcontext():
            return _publish(candidates, index, project)
    except BaseException:
        for directory in reversed(created):
            _remove_if_only_lock(directory)
        raise


def preflight(wheels: list[Path], index: Path, *, project: str, allow_dirty: bool = False) -> list[Path]:
    """The wheels a publish would add, after every check it makes before writing (readable wheels of
    `project`, no dirty build unless `allow_dirty`, no clash, the patch level going up); nothing is written.

    The command gathers evidence for these alone: a wheel the index already holds (the same bytes, or
    the same files) adds nothing, and a wheel that would be refused anyway is refused first, cheaply.
    """
    candidates = _candidates(wheels, project, allow_dirty)
    return [w.path for w in _plan(candidates, index / "simple", project).added]


def _candidates(wheels: list[Path], project: str | None, allow_dirty: bool) -> list[Wheel]:
    candidates = [inspect_wheel(path) for path in wheels]
    if project is not None:
        for wheel in candidates:
            if wheel.project != project:
                raise ForeignProjectError(
                    f"{wheel.name} is a wheel of {wheel.project}, not of {project}; nothing was published"
                )
            if is_dirty(wheel.version) and not allow_dirty:
                raise DirtyWheelError(
                    f"{wheel.name} is a dirty build (its tree was not its commit; _build_info.json says why); "
                    "nothing was published"
                )
    return candidates


def _publish(candidates: list[Wheel], index: Path, project: str | None) -> Outcome:
    simple = index / "simple"
    if project is not None and simple.is_dir():
        others = sorted(p.name for p in simple.iterdir() if p.is_dir() and not p.name.startswith("."))
        others = [name for name in others if name != project]
        if others:
            raise ForeignProjectError(
                f"{simple} holds {', '.join(others)} beside {project}, which no publish of ours puts there; "
                "nothing was published"
            )
    repaired = repair(simple)
    for name in sorted({w.project for w in candidates}):
        check_consistent(simple / name)
    plan = _plan(candidates, simple, project)
    written: list[str] = []
    if plan.added:  # a rerun with nothing new writes nothing, so it also works on a read-only index
        _check_writable(index, simple, {w.project for w in plan.added})
        written = _apply(plan.added, simple)
    return Outcome([w.name for w in plan.added], [w.name for w in plan.already], repaired, plan.skipped, written)


def _make_index_dir(index: Path) -> list[Path]:
    """Create INDEX_DIR and its missing parents (as --help says); returns what was created."""
    if index.is_dir():
        return []
    problem = writable_dir_problem(index)
    if problem:
        raise IndexNotWritableError(f"cannot create the index {index}: {problem}; nothing was published")
    missing = [index, *(p for p in index.parents if not p.exists())]
    index.mkdir(parents=True)
    return sorted(missing, key=lambda p: len(p.parts))


def _remove_if_only_lock(directory: Path) -> None:
    # Bad input leaves nothing behind: a directory we made holds at most our lock files.
    if directory.is_dir() and all(p.name.startswith(INDEX_LOCK) for p in directory.iterdir()):
        for p in directory.iterdir():
            p.unlink()
        directory.rmdir()


def _writable(directory: Path) -> bool:
    mode = directory.stat().st_mode
    return os.access(directory, os.W_OK) and bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _check_writable(index: Path, simple: Path, projects: set[str]) -> None:
    # Root may write anywhere; a directory without write bits still means "leave this alone".
    for directory in [index, simple, index / REQUIREMENTS, *(simple / p for p in sorted(projects))]:
        if directory.exists() and not _writable(directory):
            raise IndexNotWritableError(f"{directory} is read-only; nothing was published")


def repair(simple: Path) -> list[str]:
    """Finish what an interrupted publish left, or refuse what no publish of ours can leave.

    Runs under the index lock, so every `.publish-*` file is a dead publish's: removed. A wheel
    on disk that its page does not list (renamed in before the page was) and a page that is
    truncated or stale are repaired by regenerating the page from the files, each checked. A
    listed file that is gone or has other bytes, or a stray non-wheel, is refused: no crash of
    ours makes those. A read-only index is never repaired, only refused.
    """
    if not simple.is_dir():
        return []
    done: list[str] = []
    writable = _writable(simple)
    projects = sorted(p for p in simple.iterdir() if p.is_dir() and not p.name.startswith("."))
    requirements = simple.parent / REQUIREMENTS
    # In requirements/ every hidden file is a dead write of ours: a publish's or write_atomic's temporary.
    leftovers = sorted(
        [p for d in [simple, *projects] for p in d.iterdir() if p.name.startswith(TMP_PREFIX)]
        + ([p for p in requirements.iterdir() if p.name.startswith(".")] if requirements.is_dir() else [])
    )
    if leftovers:
        if not writable or not all(_writable(p.parent) for p in leftovers):
            shown = ", ".join(str(p) for p in leftovers)
            raise IndexCorruptError(f"leftovers of an interrupted publish in a read-only index: {shown}")
        for path in leftovers:
            path.unlink()
        done.append(f"removed {len(leftovers)} leftover(s) of an interrupted publish ({leftovers[0].name}, ...)")
    for project_dir in projects:
        page = project_dir / "index.html"
        listed = _listed(page)
        on_disk = {p.name for p in project_dir.iterdir() if p.name != "index.html"}
        gone = sorted(set(listed) - on_disk)
        if gone:
            raise IndexCorruptError(f"{page} lists {', '.join(gone)}, which is gone from {project_dir}")
        for name, sha in sorted(listed.items()):
            if file_sha256(project_dir / name) != sha:
                raise IndexCorruptError(f"{project_dir / name} does not have the sha256 its index.html lists")
        wheels = []
        for name in sorted(on_disk):
            path = project_dir / name
            if not name.endswith(".whl") or not path.is_file():
                raise IndexCorruptError(f"{path} is not a wheel; no publish puts it there")
            try:
                wheel = inspect_wheel(path)
            except BadWheelError as exc:
                raise IndexCorruptError(f"{path} is no wheel a publish puts there: {exc}") from None
            if wheel.project != project_dir.name:
                raise IndexCorruptError(f"{path} is a wheel of {wheel.project}, not of {project_dir.name}")
            wheels.append(wheel)
        expected = project_page(project_dir, project_dir.name, [])
        if _read(page) != expected:
            why = f"it did not list {', '.join(sorted(on_disk - set(listed)))}" if on_disk - set(listed) else "stale"
            _rewrite(page, expected, writable and _writable(project_dir), why)
            done.append(f"repaired {page} ({why}, left by an interrupted publish)")
    if projects:
        expected = root_page(simple, set())
        if _read(simple / "index.html") != expected:
            _rewrite(simple / "index.html", expected, writable, "it did not list every project")
            done.append(f"repaired {simple / 'index.html'} (it did not list every project)")
    return done + _repair_requirements(simple.parent, writable)


def _repair_requirements(index: Path, writable: bool) -> list[str]:
    """Write the requirements files that are missing or name another wheel than the newest; refuse strays."""
    directory = index / REQUIREMENTS
    expected = requirements_files(index, [])
    if directory.is_dir():
        strays = sorted(p.name for p in directory.iterdir() if directory / p.name not in expected)
        if strays:
            raise IndexCorruptError(f"{directory / strays[0]} is no requirements file a publish writes there")
    done: list[str] = []
    for path, text in expected.items():
        current = _read(path)
        if current == text:
            continue
        # Missing: an index published before publish wrote them, or a crash before their rename.
        why = "it was missing" if not path.exists() else "it did not name the newest wheel"
        can_write = writable and _writable(index) and (not directory.exists() or _writable(directory))
        if can_write:
            directory.mkdir(exist_ok=True)
        _rewrite(path, text, can_write, why)
        done.append(f"wrote {path.relative_to(index)} ({why})")
    return done


def _listed(page: Path) -> dict[str, str]:
    """{file name: sha256} of what a project page of ours links, read as any index page is read.

    The name is the link's target (the file on disk beside the page); a link without a sha256, or
    one cut short by a crash, lists nothing, so the page is regenerated rather than trusted.
    """
    try:
        packages = parse_project_page("", "text/html", _read(page), page.parent.name).packages
    except PackageIndexError:
        return {}  # no page a publish writes: nothing on it is trusted, and it is regenerated
    listed = {}
    for package in packages:
        sha = package.digests.get("sha256", "")
        if SHA256_RE.fullmatch(sha):
            listed[urllib.parse.unquote(package.url)] = sha
    return listed


def _read(page: Path) -> str:
    try:
        return page.read_text("utf-8")
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError:
        return "\0"  # not text: never equal to a page we would write, so it is regenerated


def _rewrite(page: Path, text: str, writable: bool, why: str) -> None:
    if not writable:
        raise IndexCorruptError(f"{page} is half-written or stale ({why}) and the index is read-only")
    write_atomic(page, text.encode("utf-8"))


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
    listed = _listed(page)
    if set(listed) != on_disk:
        missing, unlisted = sorted(set(listed) - on_disk), sorted(on_disk - set(listed))
        raise IndexCorruptError(
            f"{page} does not match the directory (listed but missing: {missing or 'none'}; "
            f"present but unlisted: {unlisted or 'none'})"
        )
    for name, sha in sorted(listed.items()):
        if file_sha256(project_dir / name) != sha:
            raise IndexCorruptError(f"{project_dir / name} does not have the sha256 its index.html lists")


def _plan(candidates: list[Wheel], simple: Path, project: str | None) -> Plan:
    """What goes in: new wheels; what does not: the same bytes (already), the same files (skipped).

    Files are compared only for the command (`project` given, so every wheel is ours): the build
    information it leaves out is ours to read.
    """
    added: dict[str, Wheel] = {}
    already: list[Wheel] = []
    skipped: list[Skipped] = []
    for wheel in sorted(candidates, key=lambda w: (w.project, w.version, w.name)):
        existing = simple / wheel.project / wheel.name
        if existing.exists():
            if file_sha256(existing) == wheel.sha256:
                already.append(wheel)
            elif project is not None and contents_digest(wheel) == contents_digest(inspect_wheel(existing)):
                skipped.append(Skipped(wheel.name, wheel.name, same_name=True))
            else:
                raise IndexClashError(
                    f"{existing} is already published with different bytes than {wheel.path}; nothing was published"
                )
        elif wheel.name in added:
            if added[wheel.name].sha256 != wheel.sha256:
                raise IndexClashError(f"two different wheels named {wheel.name} were given; nothing was published")
        else:
            held = _newest_held(wheel, simple, list(added.values())) if project is not None else None
            if held is not None and contents_digest(wheel) == contents_digest(held):
                skipped.append(Skipped(wheel.name, held.name, same_name=False))
            elif held is not None and wheel.version <= held.version:
                # Its requirements file would keep pinning the newest: users would never get this one.
                raise PatchLevelNotAboveError(
                    f"{wheel.name} is at or below {held.name}, the newest the index holds for vLLM {wheel.vllm}, "
                    "and its files differ: a tag's patch level only goes up; nothing was published"
                )
            else:
                added[wheel.name] = wheel
    return Plan(list(added.values()), already, skipped)


def _newest_held(wheel: Wheel, simple: Path, planned: list[Wheel]) -> Wheel | None:
    """The newest wheel the index holds (or this publish adds) for the same vLLM release as `wheel`.

    Only the newest counts: a change that is reverted (fm.1 = fm.3 != fm.2) is a new release.
    """
    project_dir = simple / wheel.project
    held = [w for w in planned if w.project == wheel.project]
    if project_dir.is_dir():
        held += [inspect_wheel(p) for p in project_dir.glob("*.whl") if not p.name.startswith(TMP_PREFIX)]
    same = [w for w in held if w.vllm == wheel.vllm]
    return max(same, key=lambda w: (w.version, w.name)) if same else None


def _apply(added: list[Wheel], simple: Path) -> list[str]:
    created: list[Path] = []
    temporaries: list[Path] = []
    written: list[str] = []
    try:
        for directory in [simple.parent, simple, *(simple / p for p in sorted({w.project for w in added}))]:
            if not directory.exists():
                directory.mkdir()
                created.append(directory)
        fault_point("publish:dirs")
        renames: list[tuple[Path, Path]] = []
        for wheel in added:
            temporary = simple / wheel.project / f"{TMP_PREFIX}{wheel.name}"
            temporaries.append(temporary)
            _copy(wheel.path, temporary)
            fault_point("publish:copied")
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
            _write_new(temporary, io.BytesIO(text.encode("utf-8")))
            fault_point("publish:page-written")
            renames.append((temporary, page))
        # Renamed after the pages, so a requirements file never names a wheel that is not in place.
        for path, text in requirements_files(simple.parent, added).items():
            if _read(path) == text:
                continue
            if not path.parent.exists():
                path.parent.mkdir()
                created.append(path.parent)
            temporary = path.with_name(f"{TMP_PREFIX}{path.name}")
            temporaries.append(temporary)
            _write_new(temporary, io.BytesIO(text.encode("utf-8")))
            fault_point("publish:requirements-written")
            renames.append((temporary, path))
            written.append(path.relative_to(simple.parent).as_posix())
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
        fault_point("publish:renamed")
    for directory in sorted({final.parent for _, final in renames}):
        sync_dir(directory)  # the renames themselves survive a power cut, not just the bytes they name
    return written


def _copy(source: Path, target: Path) -> None:
    with open_wheel(source) as reader:
        _write_new(target, reader)


def _write_new(target: Path, source: BinaryIO) -> None:
    """A new file (never an existing one) with what `source` holds, on disk before it is renamed into place."""
    with target.open("xb") as writer:
        shutil.copyfileobj(source, writer, 1 << 22)
        writer.flush()
        os.fsync(writer.fileno())


def requirements_files(index: Path, new: list[Wheel]) -> dict[Path, str]:
    """INDEX/requirements/vllm-<X>.txt for each vLLM release X the index holds our wheels for."""
    project_dir = index / "simple" / PROJECT
    known = {w.name: w for w in new if w.project == PROJECT}
    if project_dir.is_dir():
        for path in project_dir.glob("*.whl"):
            if path.name not in known and not path.name.startswith(TMP_PREFIX):
                known[path.name] = inspect_wheel(path)
    newest: dict[str, Wheel] = {}
    for wheel in known.values():
        held = newest.get(wheel.vllm)
        if held is None or (wheel.version, wheel.name) > (held.version, held.name):
            newest[wheel.vllm] = wheel
    return {index / REQUIREMENTS / f"vllm-{v}.txt": requirements_text(w) for v, w in sorted(newest.items())}


def requirements_text(wheel: Wheel) -> str:
    """One wheel pinned by version and sha256: pip's hash-checking mode then takes that file or nothing."""
    sources = f"--no-index --find-links <URL>/simple/{PROJECT}/ -r <URL>/{REQUIREMENTS}/vllm-{wheel.vllm}.txt"
    return "\n".join(
        [
            f"# {PROJECT} for vLLM {wheel.vllm}: the newest overlay of that release in this index, pinned by",
            "# its version and its sha256: pip and uv install that one file or nothing. Written by",
            "# `python -m release publish`. Beside vLLM "
            f'{wheel.vllm}, with <URL> where the index is served (docs/overlay.md, "Install"):',
            f"#   python -m pip install {sources}",
            f"#   uv pip install --no-config {sources}",
            f"{PROJECT}=={wheel.version} \\",
            f"    --hash=sha256:{wheel.sha256}",
            "",
        ]
    )


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
