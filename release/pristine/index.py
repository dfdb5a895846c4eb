"""The package index: which vLLM releases exist, and which wheel file (URL, sha256, size) is each one's.

We ask the index's simple API (PEP 691 JSON, or PEP 503 HTML where an index only has that), the
way pip does, so any index works: PyPI by default, a mirror or a loopback test index through
VLLM_FUSED_MOE_INDEX_URL. The index's sha256 of the whole wheel file is the identity we record
(UPSTREAM.toml, the train, the scan); a lazy read never sees the whole file, so it checks each
member it reads against the wheel's RECORD instead (release/pristine/wheel.py).

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
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import requests
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from release.core.errors import PackageIndexError, UnknownTagError

PROJECT = "vllm"
DEFAULT_INDEX_URL = "https://pypi.org/simple/"
INDEX_ENV = "VLLM_FUSED_MOE_INDEX_URL"
# Connect fast, but give a 400 MB body time; a stalled index must not hang the tool forever.
TIMEOUT = (15, 120)
USER_AGENT = "vllm-fused-moe-release (+https://github.com/vllm-project/vllm)"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


def index_url() -> str:
    url = os.environ.get(INDEX_ENV, "").strip() or DEFAULT_INDEX_URL
    return url if url.endswith("/") else url + "/"


@cache
def session() -> requests.Session:
    """One keep-alive session per process: a lazy read is a handful of requests to the same host."""
    s = requests.Session()
    s.headers["User-Agent"] = USER_AGENT
    return s


@dataclass(frozen=True)
class IndexFile:
    """One wheel file as the index lists it."""

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
    def from_json(cls, data: dict[str, object]) -> IndexFile:
        size = data.get("size")
        build = data.get("build")
        return cls(
            filename=str(data["filename"]),
            url=str(data["url"]),
            sha256=str(data["sha256"]),
            size=int(size) if isinstance(size, int) else None,
            version=str(data["version"]),
            build=int(build) if isinstance(build, int) else None,
            yanked=bool(data.get("yanked", False)),
        )


@dataclass(frozen=True)
class Release:
    """One final release on the index and the wheel we read for it (None: sdist only or all yanked)."""

    version: Version
    wheel: IndexFile | None
    why_none: str = ""


# --------------------------------------------------------------------- reading


@cache
def _get_project_page(base: str) -> tuple[str, str, str]:
    """(final URL, Content-Type, body) of the project's page; asked once per process."""
    url = urljoin(base, f"{PROJECT}/")
    try:
        response = session().get(url, headers={"Accept": JSON_ACCEPT}, timeout=TIMEOUT)
    except requests.RequestException as exc:
        raise PackageIndexError(f"cannot reach the package index at {url}: {type(exc).__name__}") from None
    if response.status_code == 404:
        raise PackageIndexError(f"the package index at {base} has no project {PROJECT!r}")
    if not response.ok:
        raise PackageIndexError(f"the package index answered {response.status_code} for {url}")
    return response.url, response.headers.get("Content-Type", ""), response.text


@cache
def project_files(base: str) -> tuple[IndexFile, ...]:
    """Every wheel of the project on the index at `base`."""
    page_url, content_type, text = _get_project_page(base)
    try:
        if "json" in content_type:
            raw = _files_from_json(page_url, json.loads(text))
        else:
            raw = _files_from_html(page_url, text)
    except (ValueError, KeyError, TypeError) as exc:
        raise PackageIndexError(f"cannot parse the index page {page_url}: {exc}") from None
    return tuple(raw)


def _wheel_file(
    filename: str, url: str, sha256: str | None, size: object, yanked: object, page_url: str
) -> IndexFile | None:
    if not filename.endswith(".whl") or not sha256:
        return None  # an sdist, or a file the index gives no sha256 for: nothing we could verify
    try:
        _, version, build, _ = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    return IndexFile(
        filename=filename,
        url=urljoin(page_url, url),
        sha256=sha256.lower(),
        size=size if isinstance(size, int) else None,
        version=str(version),
        build=build[0] if build else None,
        yanked=bool(yanked),
    )


def _files_from_json(page_url: str, data: dict[str, object]) -> list[IndexFile]:
    files = data["files"]
    if not isinstance(files, list):
        raise ValueError("`files` is not a list")
    found = []
    for item in files:
        hashes = item.get("hashes") or {}
        wheel = _wheel_file(
            item["filename"], item["url"], hashes.get("sha256"), item.get("size"), item.get("yanked"), page_url
        )
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
        filename = html.unescape(label).strip() or Path(urlsplit(url).path).name
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
    _, content_type, text = _get_project_page(base)
    if "json" not in content_type:
        return []
    try:
        listed = [Version(v) for v in json.loads(text).get("versions", [])]
    except (ValueError, InvalidVersion):
        return []
    with_wheels = {Version(w.version) for w in project_files(base)}
    return [str(v) for v in sorted(listed) if v not in with_wheels and not (v.is_prerelease or v.is_devrelease)]


def release_wheel(version: str, base: str | None = None) -> IndexFile:
    """The wheel we read for `version` (e.g. "0.21.0"); UnknownTagError if the index has none."""
    base = base or index_url()
    wanted = Version(version)
    wheels = [w for w in project_files(base) if Version(w.version) == wanted]
    chosen = choose_wheel(wheels)
    if chosen is None:
        raise UnknownTagError(f"no vLLM release {version} on the package index ({base})")
    return chosen


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
