"""What the index serves, generated from the files on disk: the PEP 503 pages (INDEX/simple/index.html, one
page per project linking each wheel as `<file>#sha256=<hex>` with `data-requires-python`) and INDEX/requirements/
vllm-<X>.txt, which pins our newest wheel for vLLM X by version and sha256 (pip's hash-checking mode then refuses
every other file)."""

from __future__ import annotations

import html
import urllib.parse
from pathlib import Path

from release.core.errors import PackageIndexError
from release.model.wheel import OverlayWheel
from release.overlay.project import PROJECT
from release.overlay.wheel import WheelReads
from release.pristine.index import SHA256_RE, parse_project_page

TMP_PREFIX = ".publish-"

REQUIREMENTS = "requirements"


def requirements_files(index: Path, new: list[OverlayWheel], reads: WheelReads) -> dict[Path, str]:
    """INDEX/requirements/vllm-<X>.txt for each vLLM release X the index holds our wheels for."""
    project_dir = index / "simple" / PROJECT
    known = {w.name: w for w in new if w.project == PROJECT}
    if project_dir.is_dir():
        for path in project_dir.glob("*.whl"):
            if path.name not in known and not path.name.startswith(TMP_PREFIX):
                known[path.name] = reads(path)
    newest: dict[str, OverlayWheel] = {}
    for wheel in known.values():
        held = newest.get(wheel.vllm)
        if held is None or (wheel.version, wheel.name) > (held.version, held.name):
            newest[wheel.vllm] = wheel
    return {index / REQUIREMENTS / f"vllm-{v}.txt": requirements_text(w) for v, w in sorted(newest.items())}


def requirements_text(wheel: OverlayWheel) -> str:
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


def project_page(project_dir: Path, project: str, new: list[OverlayWheel], reads: WheelReads) -> str:
    """The page of one project: earlier files (read back from disk) and the new ones, newest version last."""
    known = {w.name: w for w in new}
    if project_dir.is_dir():
        for path in project_dir.glob("*.whl"):
            if path.name not in known and not path.name.startswith(TMP_PREFIX):
                known[path.name] = reads(path)
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


def listed_files(page: Path) -> dict[str, str]:
    """{file name: sha256} of what a project page of ours links, read as any index page is read.

    The name is the link's target (the file on disk beside the page); a link without a sha256, or
    one cut short by a crash, lists nothing, so the page is regenerated rather than trusted.
    """
    try:
        packages = parse_project_page("", "text/html", read_page(page), page.parent.name).packages
    except PackageIndexError:
        return {}  # no page a publish writes: nothing on it is trusted, and it is regenerated
    listed = {}
    for package in packages:
        sha = package.digests.get("sha256", "")
        if SHA256_RE.fullmatch(sha):
            listed[urllib.parse.unquote(package.url)] = sha
    return listed


def read_page(page: Path) -> str:
    try:
        return page.read_text("utf-8")
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError:
        return "\0"  # not text: never equal to a page we would write, so it is regenerated
