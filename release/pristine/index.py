"""The package index: which vLLM releases exist, and which wheel file (URL, sha256, size) is each one's.

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

import html
import json
import os
import re
import sys
from dataclasses import asdict, dataclass
from functools import cache
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from release.core.errors import PackageIndexError, TransportError, UnknownTagError, UnsafeIndexError
from release.pristine import transport

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
        elif version is not None and parsed != Version(version):
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

    version: Version
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

    answer, body = transport.get(
        url, f"the package index page {url}", headers={"Accept": JSON_ACCEPT}, expect=expect, limit=PAGE_LIMIT
    )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise PackageIndexError(f"the index page {url} is not UTF-8 text") from None
    return answer.url, answer.headers.get("Content-Type", ""), text


@cache
def project_files(base: str) -> tuple[IndexFile, ...]:
    """Every wheel of the project on the index at `base`."""
    page_url, content_type, text = _get_project_page(base)
    if "json" in content_type:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PackageIndexError(f"the index page {page_url} is not JSON: {exc}") from None
        raw = _files_from_json(page_url, data)
    else:
        raw = _files_from_html(page_url, text)
    return tuple(raw)


def _wheel_file(
    filename: str, url: str, sha256: str | None, size: object, yanked: object, page_url: str
) -> IndexFile | None:
    if not filename.endswith(".whl") and not any(c in filename for c in "/\\\0"):
        return None  # an sdist (or some other file): not ours to read
    # Checked here, before the name goes anywhere: every name on the page, whichever release it is.
    checked_name(filename, where=f"the package index page {page_url}")
    if not sha256:
        return None  # a file the index gives no sha256 for: nothing we could verify
    _, version, build, _ = parse_wheel_filename(filename)
    if not SHA256_RE.match(sha256.lower()):
        raise PackageIndexError(f"the index page {page_url} gives {filename} the sha256 {sha256[:80]!r}")
    return IndexFile(
        filename=filename,
        url=urljoin(page_url, url),
        sha256=sha256.lower(),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        version=str(version),
        build=build[0] if build else None,
        yanked=bool(yanked),
    )


def _files_from_json(page_url: str, data: object) -> list[IndexFile]:
    """PEP 691: `{"files": [{"filename", "url", "hashes": {"sha256"}, "size"?, "yanked"?}, ...]}`."""

    def bad(what: str) -> PackageIndexError:
        return PackageIndexError(f"the index page {page_url} is not a PEP 691 project page: {what}")

    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise bad("`files` is not a list")
    found = []
    for number, item in enumerate(files):
        if not isinstance(item, dict):
            raise bad(f"files[{number}] is a {type(item).__name__}, not an object")
        filename, url, hashes = item.get("filename"), item.get("url"), item.get("hashes", {})
        if not isinstance(filename, str) or not isinstance(url, str):
            raise bad(f"files[{number}] has no string `filename` and `url`")
        if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
            raise bad(f"files[{number}] ({filename!r}): `hashes` is not an object of strings")
        size = item.get("size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise bad(f"files[{number}] ({filename!r}): `size` is not a number of bytes")
        wheel = _wheel_file(filename, url, hashes.get("sha256"), size, item.get("yanked"), page_url)
        if wheel:
            found.append(wheel)
    return found


ANCHOR_RE = re.compile(r"<a\s+([^>]*)>([^<]*)</a>", re.I)
HREF_RE = re.compile(r'href\s*=\s*"([^"]*)"', re.I)


def _files_from_html(page_url: str, text: str) -> list[IndexFile]:
    """PEP 503: `<a href="URL#sha256=HEX" [data-yanked]>FILENAME</a>`."""
    found = []
    for attrs, label in ANCHOR_RE.findall(text):
        href = HREF_RE.search(attrs)
        if not href:
            continue
        url, _, fragment = html.unescape(href.group(1)).partition("#")
        sha = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        # The label is the file name (PEP 503); where it is empty, the last segment of the URL's path.
        filename = html.unescape(label).strip() or unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        wheel = _wheel_file(filename, url, sha, None, "data-yanked" in attrs, page_url)
        if wheel:
            found.append(wheel)
    return found


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
    by_version: dict[Version, list[IndexFile]] = {}
    for wheel in project_files(base):
        by_version.setdefault(Version(wheel.version), []).append(wheel)
    found = []
    for version in sorted(by_version):
        if version.is_prerelease or version.is_devrelease:
            continue
        chosen = choose_wheel(by_version[version])
        found.append(Release(version, chosen, "" if chosen else "every wheel of it is yanked"))
    return found


def sdist_only(base: str | None = None) -> list[str]:
    """Final versions the index lists (PEP 700 `versions`) that have no wheel at all."""
    base = base or index_url()
    with_wheels = {Version(w.version) for w in project_files(base)}  # also proves the page is JSON, if it says so
    page_url, content_type, text = _get_project_page(base)
    if "json" not in content_type:
        return []
    data = json.loads(text)
    listed_text = data.get("versions", []) if isinstance(data, dict) else None
    if not isinstance(listed_text, list) or not all(isinstance(v, str) for v in listed_text):
        raise PackageIndexError(f"the index page {page_url} is not a PEP 700 page: `versions` is not a list of strings")
    listed = []
    for text_version in listed_text:
        try:
            listed.append(Version(text_version))
        except InvalidVersion:
            continue  # not a version we could ask for (pip skips it too)
    return [str(v) for v in sorted(listed) if v not in with_wheels and not (v.is_prerelease or v.is_devrelease)]


def release_wheel(version: str, base: str | None = None) -> IndexFile:
    """The wheel we read for `version` (e.g. "0.21.0"); UnknownTagError if the index has none."""
    base = base or index_url()
    wanted = Version(version)
    wheels = [w for w in project_files(base) if Version(w.version) == wanted]
    chosen = choose_wheel(wheels)
    if chosen is None:
        raise UnknownTagError(f"no vLLM release {version} on the package index ({base})")
    checked_name(chosen.filename, version)
    return chosen


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
