"""Every published wheel proves its fixes: issue 35's paths end in a refusal naming the bug, the tag and the line.

Real processes on a copy of the checkout, the real release wheels (cached) and this test venv as the
interpreter the evidence runs under (torch, vLLM's import-time packages): `publish` runs each bug's
regression test on the wheel's pristine vLLM release and with the wheel installed beside it
(release/evidence). Records edited by hand (patches/train.toml's `bugs`, the scan data, a line's
`skip`, the wheel's own `_build_info.json`) no longer make a wheel without its fix publishable. The
tag is data: the oldest train tag of an older release line. Every run is cached by its inputs
(~/.cache/vllm-fused-moe/evidence), so the pristine release's run is made once for the whole suite.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from helpers import run_release
from release.core.layout import Layout
from release.evidence.runner import source_tree
from release.model.lines import HEAD_LINE, read_lines
from release.model.train import Train, TrainEntry

pytestmark = pytest.mark.network  # the tag's release wheel: the cache, or the package index once

BUILD_INFO = "vllm_fused_moe/_build_info.json"


def older_line_tag(layout: Layout) -> TrainEntry:
    return next(e for e in Train.load(layout.train).entries if e.line != HEAD_LINE and e.bugs)


def pristine_files(layout: Layout, entry: TrainEntry) -> dict[str, bytes]:
    """{patched sha256: the pristine bytes} of each file the tag's series changes."""
    line = read_lines(layout.lines).get(entry.line)
    tree = source_tree(entry.tag)
    out = {}
    for name, patched in entry.patched.items():
        module = next(m for m in line.modules if m.endswith(name)) if not line.modules[0].endswith("/") else ""
        path = tree / (module or line.modules[0] + name)
        data = path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry.pristine[name]
        out[patched] = data
    return out


def undone(wheel: Path, out: Path, pristine: dict[str, bytes], build_info: str | None) -> Path:
    """`wheel` with the fix undone (each patched file back to its pristine bytes) and `_build_info.json`
    removed (None) or replaced; the same name, a deterministic zip."""
    out.mkdir()
    target = out / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as made:
        replaced = 0
        for info in source.infolist():
            data = source.read(info)
            if info.filename == BUILD_INFO:
                if build_info is None:
                    continue
                data = build_info.encode()
            digest = hashlib.sha256(data).hexdigest()
            if digest in pristine:
                data, replaced = pristine[digest], replaced + 1
            made.writestr(info, data)
    assert replaced == len(pristine), "the wheel does not hold the tag's patched files"
    return target


@pytest.mark.parametrize("build_info", ["none", "vllm_version is a list"])
def test_a_wheel_with_its_fix_undone_and_no_usable_build_info_is_refused(
    project: Path, tmp_path: Path, build_info: str
) -> None:
    """Issue 35, path 5: publish read the fix gate from the wheel's own `_build_info.json`; a wheel without one
    (or with a `vllm_version` that is a list) and with the fix undone was published and pinned."""
    layout = Layout(project)
    entry = older_line_tag(layout)
    built = run_release(project, "build", "--tag", entry.tag, "--allow-dirty", "--out", str(tmp_path / "dist"))
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        info = json.loads(archive.read(BUILD_INFO))
    text = None if build_info == "none" else json.dumps({**info, "vllm_version": [info["vllm_version"]]})
    broken = undone(wheel, tmp_path / "broken", pristine_files(layout, entry), text)

    index = tmp_path / "index"
    published = run_release(project, "publish", "--allow-dirty", str(broken), str(index))
    assert published.returncode == 2, published.stdout + published.stderr
    [bug] = entry.bugs
    said = f"error: not publishing {broken.name}: bug {bug} on vLLM {entry.tag} (line {entry.line})"
    assert said in published.stderr, published.stderr
    assert "with the wheel it fails" in published.stderr, published.stderr
    assert not index.exists()
