"""A fork that carries a second bug past the release that has 0001's fix upstream (issue 36, part 2).

As a maintainer would, with real processes on a copy of the checkout and the real release wheels (cached):
0002 (the shape check, made here) fixes a bug no upstream release fixes; `scan` of the releases from the head
through the one after 0001's first fixed release marks them affected by it; `train add` records those two
releases carrying 0002 alone (0001 is upstream there); `build --tag` of both exits 0 (before, build refused: their
FlashInfer pin is outside VERIFIED.toml, which is 0001's contract, not 0002's), and `publish` of the first
fixed release's wheel, which proves both bugs on that release (the next release's wheel is the same case, so it
is built and read but not proven again: each proof is a torch and vLLM import per bug, twice); and the
doctor, fed the scan the fork wrote, names each release's bugs by the bug table: the head release both, the
first fixed release the second only, a release with neither none; installed beside that release with its
overlay, it says fixed-live. No release is named here: each comes from the pin and the scan data.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from helpers import REPO, copy_project, run_release
from helpers.freshvenv import create
from helpers.synthetic import SHAPE_CHECK_PATCH, add_shape_check
from release.core.layout import Layout
from release.model.pin import Pin
from release.pristine.wheel import pypi_wheel
from vllm_fused_moe._doctor.installed import release_facts
from vllm_fused_moe._doctor.records import ScanData
from vllm_fused_moe._doctor.words import Status

pytestmark = [pytest.mark.slow, pytest.mark.network]  # two release wheels: the cache, or the package index once

SECOND = "https://example.invalid/vllm-fused-moe/bugs/2"
TITLE = "finalize accepts an output of the wrong rank"


class Fork:
    def __init__(self, root: Path, dist: Path, index: Path, fixed: str, after: str, head: str) -> None:
        self.root, self.dist, self.index = root, dist, index
        self.fixed, self.after, self.head = fixed, after, head  # versions: 0001's first fixed, the next, the head

    @property
    def scan(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(Layout(self.root).affected_json.read_text())
        return data


@pytest.fixture(scope="module")
def fork(tmp_path_factory: pytest.TempPathFactory) -> Fork:
    root = copy_project(tmp_path_factory.mktemp("fork"))
    layout = Layout(root)
    before = json.loads(layout.affected_json.read_text())
    [(first, info)] = before["bugs"].items()
    fixed = info["first_fixed"]
    after = before["scanned"][before["scanned"].index(fixed) + 1]
    head = Pin.load(layout.upstream_toml).version
    # The newest release with neither bug that is older than the head (the scan data says which).
    neither = [
        v
        for v in before["scanned"][: before["scanned"].index(head)]
        if before["releases"][v]["status"] == "not-affected"
    ][-1]
    add_shape_check(root, lines_skip=True, bug=f"{SECOND} {TITLE}")  # the older lines do without it
    for since, until in ((neither, neither), (head, after)):  # a scan of a range keeps what it scanned before
        scanned = run_release(root, "scan", "--since", f"v{since}", "--until", f"v{until}")
        assert scanned.returncode == 0, scanned.stdout + scanned.stderr
    added = run_release(root, "train", "add", f"v{fixed}", f"v{after}")
    assert added.returncode == 0, added.stdout + added.stderr
    assert added.stdout.count(f"{SHAPE_CHECK_PATCH.removesuffix('.patch')} applies") == 2, added.stdout
    listed = run_release(root, "train", "list", "--json")
    ranges = {r["version"]: r["flashinfer_range"] for r in json.loads(listed.stdout)["releases"]}
    assert ranges[fixed] == ranges[after] == "" and ranges[head], ranges  # the head carries 0001: VERIFIED.toml
    dist, index = root.parent / "dist", root.parent / "index"
    built = run_release(root, "build", "--tag", f"v{fixed}", "--tag", f"v{after}", "--out", str(dist))
    assert built.returncode == 0, built.stdout + built.stderr
    [first_fixed] = dist.glob(f"vllm_fused_moe-{fixed}+fm.*.whl")
    published = run_release(root, "publish", str(first_fixed), str(index))
    assert published.returncode == 0, published.stdout + published.stderr
    assert first in json.loads(layout.affected_json.read_text())["bugs"]
    return Fork(root, dist, index, fixed, after, head)


def test_the_overlays_past_0001s_fix_carry_only_the_second_fix_and_ask_nothing_of_flashinfer(fork: Fork) -> None:
    for version in (fork.fixed, fork.after):
        [wheel] = fork.dist.glob(f"vllm_fused_moe-{version}+fm.*.whl")
        with zipfile.ZipFile(wheel) as archive:
            info = json.loads(archive.read("vllm_fused_moe/_build_info.json"))
            metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))
        assert [(p["name"], p["bug"]) for p in info["patches"]] == [(SHAPE_CHECK_PATCH, SECOND)]
        said = HeaderParser().parsestr(metadata.decode()).get_all("Requires-Dist") or []
        requires = [Requirement(r) for r in said]
        assert [(r.name, str(r.specifier)) for r in requires] == [("vllm", f"=={version}")]
        assert info["flashinfer_specifier"] == ""
    assert (fork.index / "requirements" / f"vllm-{fork.fixed}.txt").is_file()


def test_the_doctor_names_each_releases_bugs_by_the_bug_table(fork: Fork) -> None:
    data = fork.scan
    scan = ScanData.from_json(data)
    [first] = [b for b in data["bugs"] if b != SECOND]
    title, fixed = data["bugs"][first]["title"], data["bugs"][first]["first_fixed"]
    said = release_facts(scan, None, fork.head)  # before 0001's fix: both bugs
    assert said.status is Status.AFFECTED and set(said.needs) == {first, SECOND}, said
    assert f"{title} (fixed upstream in {fixed})" in said.why and f"{TITLE} (no upstream release" in said.why
    said = release_facts(scan, None, fork.fixed)  # 0001 upstream: the second only
    assert said.status is Status.AFFECTED and said.needs == (SECOND,), said
    assert said.why.startswith(f"this release has {TITLE} (no upstream release fixes it yet)")
    [neither] = [v for v, e in data["releases"].items() if e["status"] == "not-affected"]
    said = release_facts(scan, None, neither)
    assert said.status is Status.NOT_AFFECTED and said.needs == () and TITLE not in said.why


def test_installed_beside_the_first_fixed_release_the_second_fix_is_live(fork: Fork, tmp_path: Path) -> None:
    python = create(tmp_path / "venv", fork.index, [f"vllm-fused-moe=={fork.fixed}"], pypi_wheel(f"v{fork.fixed}"))
    proc = subprocess.run(
        [str(python), "-m", "vllm_fused_moe", "doctor", "--json"], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    report = json.loads(proc.stdout)
    assert (proc.returncode, report["verdict"]) == (0, "fixed-live"), proc.stdout + proc.stderr
    assert report["release"]["needs"] == [SECOND] and report["overlay"]["bugs"] == [SECOND]
    assert report["release"]["why"].startswith(f"this release has {TITLE}")
