"""The package index we read: vLLM's releases and each one's wheel (overlay/index.py is the index we write).

Which vLLM releases exist, and which wheel file (URL, sha256, size) is each one's.

We ask the index's simple API (PEP 691 JSON, or PEP 503 HTML where an index only has that), the
way pip does, so any index works: PyPI by default, a mirror or a loopback test index through
VLLM_FUSED_MOE_INDEX_URL. The index is not trusted (docs/guarantees.md, "The package index and
its mirrors"): every name it gives must be a base name and the canonical wheel file name of
vLLM and of the release asked for (`checked_name`) before it touches a path or a record, or the
command stops with exit 2; an answer of the wrong shape is a transport failure (exit 4); and its
sha256 is only a claim until a whole download matched it (release/pristine/wheel.py).

Which wheel of a release: a vLLM release carries several (x86_64 and aarch64; some releases
were rebuilt with a build tag, e.g. 0.21.0 has `vllm-0.21.0-…` and `vllm-0.21.0-1-…`). Their
Python files are the same; we take what pip takes on a Linux x86_64 machine: the highest build
tag, so the choice does not depend on the machine that runs the tool.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from functools import cache
from typing import TYPE_CHECKING
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from release.core import log
from release.core.errors import PackageIndexError, TransportError, UnknownTagError, UnsafeIndexError
from release.core.parse import parse_json
from release.core.versions import InvalidVersion, Pep440Version, package_version
from release.pristine import transport

if TYPE_CHECKING:
    from pypi_simple import DistributionPackage, ProjectPage

PROJECT = "vllm"
DEFAULT_INDEX_URL = "https://pypi.org/simple/"
INDEX_ENV = "VLLM_FUSED_MOE_INDEX_URL"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
PAGE_LIMIT = 64 << 20  # PyPI's page for vllm is 130 kB; a page of gigabytes is an attack, not an index
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
# A wheel file name as PEP 427 and the binary distribution format spec write it: the normalised
# project name, the normalised version, an optional build tag that starts with a digit, and three
# compressed tag sets; nothing that a path could read as a separator or a parent.
WHEEL_NAME_RE = re.compile(
    r"^(?P<name>[a-z0-9_]+)-(?P<version>[A-Za-z0-9_.!+]+)(?:-(?P<build>[0-9][A-Za-z0-9_]*))?"
    r"-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl$"
)


def index_url() -> str:
    url = os.environ.get(INDEX_ENV, "").strip() or DEFAULT_INDEX_URL
    return url if url.endswith("/") else url + "/"


def checked_name(filename: str, version: str | None = None, where: str = "the package index") -> str:
    """`filename`, proven to be a base name and the canonical wheel file name of vLLM (and of `version`).

    `packaging.utils.parse_wheel_filename` alone would take `vllm-0.21.0-1/../../../../x-cp38-abi3-any.whl`
    (a build tag is its digits and any text after them), which would then write outside the cache.
    """
    problem = ""
    if not filename or filename in (".", "..") or "/" in filename:
        problem = "is not a base name"
    elif any(c in filename for c in "\\\0") or ".." in filename:
        problem = "holds a path separator (a backslash), `..` or a NUL"
    else:
        match = WHEEL_NAME_RE.match(filename)
        try:
            name, parsed, _, _ = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            match = None
        if match is None:
            problem = "is not a wheel file name (name-version[-build]-python-abi-platform.whl)"
        elif match["name"] != PROJECT or name != PROJECT:
            problem = f"is not a wheel of {PROJECT}"
        elif match["version"] != str(parsed):
            problem = f"does not spell its version canonically ({str(parsed)!r})"
        elif version is not None and parsed != package_version(version):
            problem = f"is not a wheel of {PROJECT} {version}"
    if problem:
        raise UnsafeIndexError(f"{where} names the file {filename!r}, which {problem}; refused")
    return filename


@dataclass(frozen=True)
class IndexFile:
    """One wheel file as the index lists it (its sha256 is the index's claim, not yet verified)."""

    filename: str
    url: str
    sha256: str
    size: int | None  # PEP 700; None where the index does not say
    version: str  # normalised, e.g. "0.10.1.1"
    build: int | None  # the wheel's build tag, e.g. 1 for vllm-0.21.0-1-…
    yanked: bool = False

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object, where: str) -> IndexFile:
        """An entry recorded in the cache: held to the same rules as the index's own answer."""
        if not isinstance(data, dict):
            raise UnsafeIndexError(f"{where} is not an index entry")
        filename, url, sha256, version = (data.get(k) for k in ("filename", "url", "sha256", "version"))
        size, build = data.get("size"), data.get("build")
        if not (isinstance(filename, str) and isinstance(url, str) and isinstance(version, str)):
            raise UnsafeIndexError(f"{where} is not an index entry")
        if not (isinstance(sha256, str) and SHA256_RE.match(sha256)):
            raise UnsafeIndexError(f"{where}: its sha256 is not 64 hex digits")
        checked_name(filename, version, where)
        return cls(
            filename=filename,
            url=url,
            sha256=sha256,
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            version=version,
            build=build if isinstance(build, int) and not isinstance(build, bool) else None,
            yanked=bool(data.get("yanked", False)),
        )


@dataclass(frozen=True)
class Release:
    """One final release on the index and the wheel we read for it (None: sdist only or all yanked)."""

    version: Pep440Version
    wheel: IndexFile | None
    why_none: str = ""


# --------------------------------------------------------------------- reading


def _get_project_page(base: str) -> tuple[str, str, str]:
    """(final URL, Content-Type, body) of the project's page; asked once per process."""
    got = _project_page_or_error(base)
    if isinstance(got, TransportError):
        raise got
    return got


@cache
def _project_page_or_error(base: str) -> tuple[str, str, str] | TransportError:
    """The page, or why it could not be had: a failure is kept too, so that `train check` of 19 tags
    offline waits out the retries once, not once per tag, before it falls back to the cache."""
    try:
        return _fetch_project_page(base)
    except TransportError as exc:
        return exc


def _fetch_project_page(base: str) -> tuple[str, str, str]:
    url = urljoin(base, f"{PROJECT}/")

    def expect(answer: transport.Answer) -> None:
        if answer.status == 404:
            raise PackageIndexError(f"the package index at {base} has no project {PROJECT!r} (HTTP 404 for {url})")
        if not 200 <= answer.status < 300:
            raise PackageIndexError(f"the package index answered HTTP {answer.status} for {url}")

    log.debug(f"reading the package index page {url}")
    answer, body = transport.get(
        url, f"the package index page {url}", headers={"Accept": JSON_ACCEPT}, expect=expect, limit=PAGE_LIMIT
    )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise PackageIndexError(f"the index page {url} is not UTF-8 text") from None
    return answer.url, answer.headers.get("Content-Type", ""), text


@cache
def project_page(base: str) -> ProjectPage:
    """The project's page on the index at `base`, parsed by pypi-simple (PEP 691 JSON or PEP 503 HTML).

    One reader of both formats, a well-kept library rather than our regexes: it reads every
    attribute PEP 503/592/658/691/700 define, relative URLs against the page's and `<base>`, and
    holds JSON to the PEP 691 schema. It parses text only: the HTTP went through
    release/pristine/transport.py. What it parsed is still the index's claim: each name is checked
    (`checked_name`) before it goes anywhere, each sha256 is only trusted once a download matched it.
    """
    return parse_project_page(*_get_project_page(base))


def parse_project_page(page_url: str, content_type: str, text: str, project: str = PROJECT) -> ProjectPage:
    """A project page's text as the index served it (JSON by its Content-Type, else HTML); also our own pages."""
    # Imported here: pypi-simple brings pydantic and Beautiful Soup, a second of start-up on this
    # machine that only a command which reads an index page should pay (`train list` does not).
    from pypi_simple import ProjectPage, UnsupportedRepoVersionError

    if "json" in content_type:
        data = parse_json(text, where=f"the index page {page_url}", error=PackageIndexError)
        try:
            return ProjectPage.from_json_data(data, base_url=page_url or None)
        except (ValueError, UnsupportedRepoVersionError) as exc:
            raise PackageIndexError(
                f"the index page {page_url} is not a PEP 691 project page: {_first_problem(exc)}"
            ) from None
    try:
        return ProjectPage.from_html(project, text, base_url=page_url or None)
    except (ValueError, UnsupportedRepoVersionError, AssertionError) as exc:
        # AssertionError: pypi-simple asserts the types of the attributes it reads from the HTML.
        raise PackageIndexError(f"the index page {page_url} is not a PEP 503 project page: {exc}") from None


def _first_problem(exc: Exception) -> str:
    """One line for a page of the wrong shape: where and what, from pydantic's list of errors."""
    errors = getattr(exc, "errors", None)  # pydantic's ValidationError (a ValueError) lists them
    if callable(errors):
        found = errors()
        if found:
            where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in found[0]["loc"])
            return f"`{where.lstrip('.') or 'the page'}`: {found[0]['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


@cache
def project_files(base: str) -> tuple[IndexFile, ...]:
    """Every wheel of the project on the index at `base`."""
    return wheels_on(project_page(base), _get_project_page(base)[0])


def wheels_on(page: ProjectPage, page_url: str) -> tuple[IndexFile, ...]:
    """The wheels a parsed project page lists, each name checked; sdists and files without a sha256 left out."""
    found = []
    for package in page.packages:
        # PEP 503 makes the link's text the file name; where it is empty, the last segment of the URL's path.
        filename = package.filename or unquote(urlsplit(package.url).path.rsplit("/", 1)[-1])
        wheel = _wheel_file(filename, package, page_url)
        if wheel:
            found.append(wheel)
    return tuple(found)


def _wheel_file(filename: str, package: DistributionPackage, page_url: str) -> IndexFile | None:
    if not filename.endswith(".whl") and not any(c in filename for c in "/\\\0"):
        return None  # an sdist (or some other file): not ours to read
    # Checked here, before the name goes anywhere: every name on the page, whichever release it is.
    checked_name(filename, where=f"the package index page {page_url}")
    sha256, size = package.digests.get("sha256"), package.size
    if size is not None and size < 0:
        raise PackageIndexError(
            f"the index page {page_url} is not a PEP 691 project page: {filename!r}: `size` is not a number of bytes"
        )
    if not sha256:
        return None  # a file the index gives no sha256 for: nothing we could verify
    _, version, build, _ = parse_wheel_filename(filename)
    if not SHA256_RE.match(sha256.lower()):
        raise PackageIndexError(f"the index page {page_url} gives {filename} the sha256 {sha256[:80]!r}")
    return IndexFile(
        filename=filename,
        url=package.url,
        sha256=sha256.lower(),
        size=size,
        version=str(version),
        build=build[0] if build else None,
        yanked=package.is_yanked,
    )


# ------------------------------------------------------------------- choosing


def _preference(wheel: IndexFile) -> tuple[int, int, int, str]:
    name = wheel.filename
    linux_x86 = int("linux" in name and "x86_64" in name)
    # abi3 wheels serve every CPython; among per-version wheels take the newest CPython tag.
    cp = max((int(m) for m in re.findall(r"cp3(\d+)", name)), default=0)
    return (linux_x86, wheel.build if wheel.build is not None else -1, cp, name)


def choose_wheel(wheels: list[IndexFile]) -> IndexFile | None:
    usable = [w for w in wheels if not w.yanked]
    return max(usable, key=_preference) if usable else None


def releases(base: str | None = None) -> list[Release]:
    """Every final release on the index (pre- and dev releases left out), oldest first."""
    base = base or index_url()
    by_version: dict[Pep440Version, list[IndexFile]] = {}
    for wheel in project_files(base):
        by_version.setdefault(package_version(wheel.version), []).append(wheel)
    found = []
    for version in sorted(by_version):
        if version.is_prerelease or version.is_devrelease:
            continue
        chosen = choose_wheel(by_version[version])
        found.append(Release(version, chosen, "" if chosen else "every wheel of it is yanked"))
    return found


def sdist_only(base: str | None = None) -> list[str]:
    """Final versions the index lists (PEP 700 `versions`, JSON pages only) that have no wheel at all."""
    base = base or index_url()
    with_wheels = {package_version(w.version) for w in project_files(base)}
    listed = []
    for text_version in project_page(base).versions or []:
        try:
            listed.append(package_version(text_version))
        except InvalidVersion:
            continue  # not a version we could ask for (pip skips it too)
    return [str(v) for v in sorted(listed) if v not in with_wheels and not (v.is_prerelease or v.is_devrelease)]


def release_wheel(version: str, base: str | None = None) -> IndexFile:
    """The wheel we read for `version` (e.g. "0.21.0"); UnknownTagError if the index has none."""
    base = base or index_url()
    wanted = package_version(version)
    wheels = [w for w in project_files(base) if package_version(w.version) == wanted]
    chosen = choose_wheel(wheels)
    if chosen is None:
        raise UnknownTagError(tag=version, index=base)
    checked_name(chosen.filename, version)
    return chosen
