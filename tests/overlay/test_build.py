"""The overlay wheel: reproducible, honest metadata, the whole subtree and its provenance inside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from helpers import tag_facts
from helpers.build import plan
from helpers.freshvenv import pip_env
from release.core.errors import BadPatchLevelError
from release.core.hashing import sha256_hex
from release.core.layout import BESIDE_SUBTREE, Layout, read_tree
from release.model.pin import Pin
from release.model.series import Series
from release.overlay.build import build
from release.overlay.project import PTH_LINE, PTH_NAME
from release.overlay.target import BuildResult, overlay_version
from release.queue.verified import read_verified


def _metadata(wheel: Path) -> tuple[Message, zipfile.ZipFile]:
    archive = zipfile.ZipFile(wheel)
    name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    return HeaderParser().parsestr(archive.read(name).decode()), archive


def test_two_builds_of_one_commit_are_byte_identical(built: BuildResult, layout: Layout, tmp_path: Path) -> None:
    again = build(plan(layout, tmp_path / "again"))
    assert again.wheel.name == built.wheel.name
    assert again.sha256 == built.sha256
    print(
        f"\nbuild: {built.wheel.name} {built.size} bytes in {built.seconds:.2f} s; rebuild {again.seconds:.2f} s; "
        f"sha256 {built.sha256}"
    )


def test_metadata_pins_the_vllm_tag_and_the_verified_flashinfer(built: BuildResult, layout: Layout) -> None:
    headers, archive = _metadata(built.wheel)
    pin = Pin.load(layout.upstream_toml)
    requires = {Requirement(r).name: Requirement(r) for r in headers.get_all("Requires-Dist") or []}
    assert set(requires) == {"vllm", "flashinfer-python"}
    assert str(requires["vllm"].specifier) == f"=={pin.version}"
    # The head's own FlashInfer pin intersected with the verified versions.
    expected = read_verified(layout.verified_toml).range_for(pin.flashinfer)
    assert expected and requires["flashinfer-python"].specifier == SpecifierSet(expected)
    assert headers["Name"] == "vllm-fused-moe"
    assert Version(headers["Version"]).public == pin.version
    assert headers["Requires-Python"]
    assert archive.read(PTH_NAME).decode() == PTH_LINE


def test_wheel_holds_the_vendored_subtree_byte_for_byte_and_its_provenance(built: BuildResult, layout: Layout) -> None:
    _headers, archive = _metadata(built.wheel)
    for rel, data in read_tree(layout.subtree).items():
        assert archive.read(f"vllm_fused_moe/prepare_finalize/{rel}") == data, rel
    assert archive.read("vllm_fused_moe/UPSTREAM.toml") == layout.upstream_toml.read_bytes()
    assert archive.read("vllm_fused_moe/VERIFIED.toml") == layout.verified_toml.read_bytes()
    assert archive.read("vllm_fused_moe/affected-releases.json") == layout.affected_json.read_bytes()  # doctor reads it
    assert archive.read("vllm_fused_moe/patches/series") == layout.series.read_bytes()
    names = Series.load(layout.series).names
    for name in names:
        assert archive.read(f"vllm_fused_moe/patches/{name}") == (layout.patches / name).read_bytes()
    info = json.loads(archive.read("vllm_fused_moe/_build_info.json"))
    assert [p["name"] for p in info["patches"]] == names
    assert all("Origin" in p["trailers"] for p in info["patches"])
    assert not [n for n in archive.namelist() if "__pycache__" in n or n.endswith(".pyc")]
    # Every file the wheel serves, with its sha256: what the hook checks before it serves any.
    assert info["files"] == {f"prepare_finalize/{rel}": sha256_hex(d) for rel, d in read_tree(layout.subtree).items()}


def _files_problem(package_root: Path) -> str:
    """What the installed hook says of its files (`_activate.files_problem()`), in a process of its own."""
    code = "from vllm_fused_moe import _activate; print(_activate.files_problem())"
    env = {k: v for k, v in os.environ.items() if k != "VLLM_FUSED_MOE"}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(package_root)},
        cwd=package_root,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("damage", ["deleted", "changed", "emptied"])
def test_the_hook_finds_any_served_file_deleted_or_changed(built: BuildResult, tmp_path: Path, damage: str) -> None:
    zipfile.ZipFile(built.wheel).extractall(tmp_path)
    assert _files_problem(tmp_path) == "None"
    # The last module the build recorded (not an __init__.py, which the older check looked for too).
    info = json.loads((tmp_path / "vllm_fused_moe" / "_build_info.json").read_text())
    rel = sorted(n for n in info["files"] if not n.endswith("__init__.py"))[-1]
    module = tmp_path / "vllm_fused_moe" / rel
    if damage == "deleted":
        module.unlink()
    elif damage == "changed":
        module.write_text(module.read_text() + "# edited after the install\n")
    else:
        module.write_bytes(b"")
    problem = _files_problem(tmp_path)
    what = "is missing" if damage == "deleted" else "is not the file the build made"
    assert problem.startswith("the overlay's files are damaged in ")
    assert f"{rel} {what}; reinstall vllm-fused-moe" in problem


def test_the_wheel_is_our_runtime_and_upstreams_files_and_nothing_else(built: BuildResult, layout: Layout) -> None:
    """Assembled from two places: release/overlay/runtime/ (ours, under the names it has installed) and
    vendor/vllm_fused_moe/ (upstream's files and their pins), plus what the build writes."""
    archive = zipfile.ZipFile(built.wheel)
    ours = {p.relative_to(layout.runtime).as_posix(): p.read_bytes() for p in _files(layout.runtime)}
    theirs = {f"vllm_fused_moe/prepare_finalize/{rel}": data for rel, data in read_tree(layout.subtree).items()}
    theirs |= {f"vllm_fused_moe/{name}": (layout.vendored / name).read_bytes() for name in BESIDE_SUBTREE}
    for name, data in {**ours, **theirs}.items():
        assert archive.read(name) == data, name
    written = {PTH_NAME, "vllm_fused_moe/_build_info.json", "vllm_fused_moe/patches/series"}
    written |= {f"vllm_fused_moe/patches/{name}" for name in Series.load(layout.series).names}
    shipped = {n for n in archive.namelist() if ".dist-info/" not in n}
    assert shipped == set(ours) | set(theirs) | written
    assert "vllm_fused_moe/affected-releases.json" in ours  # the doctor's data, beside it


def _files(top: Path) -> list[Path]:
    return [p for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def test_build_never_writes_into_vendor_or_the_runtime(layout: Layout, tmp_path: Path) -> None:
    tops = (layout.vendored, layout.runtime)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for top in tops for p in _files(top)}
    build(plan(layout, tmp_path))
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for top in tops for p in _files(top)}
    assert after == before


def test_version_scheme_orders_patch_levels_and_vllm_releases() -> None:
    versions = [
        Version(overlay_version(v, n))
        for v, n in [("0.20.0", 1), ("0.20.0", 2), ("0.20.0", 9), ("0.20.0", 10), ("0.20.1", 1), ("0.21.0", 1)]
    ]
    assert versions == sorted(versions)
    assert Version("0.20.0") < versions[0] < Version("0.20.1")
    # `vllm-fused-moe==0.20.0` means "the overlay for vLLM 0.20.0, newest patch level".
    assert all(v in SpecifierSet("==0.20.0") for v in versions[:4])
    assert versions[4] not in SpecifierSet("==0.20.0")
    with pytest.raises(BadPatchLevelError, match="not a positive integer"):
        overlay_version("0.20.0", 0)


def test_pip_picks_the_newest_patch_level_from_the_index(built: BuildResult, layout: Layout, tmp_path: Path) -> None:
    from release.overlay.index import publish

    # One above the built level (the recorded one, or one more where the runtime changed since `build` recorded it).
    newer = build(
        plan(layout, tmp_path / "fm-next", patch_level=int(str(Version(built.version).local).split(".")[1]) + 1)
    )
    index = tmp_path / "index"
    publish([built.wheel], index)
    publish([newer.wheel], index)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--dest",
            str(tmp_path / "got"),
            "--index-url",
            (index / "simple").as_uri(),
            f"vllm-fused-moe=={tag_facts.head().version}",
        ],
        check=True,
        env=pip_env(),
        capture_output=True,
        text=True,
    )
    assert [p.name for p in (tmp_path / "got").iterdir()] == [newer.wheel.name]
