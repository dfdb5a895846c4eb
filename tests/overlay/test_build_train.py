"""One overlay wheel per train tag: reproducible, each for its own tag, its FlashInfer range verified.

`build --all` (and `--tag`) runs as a real `python -m release` process on a copy of the
project; the wheels are real PyPA builds, read back with zipfile and `packaging`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from helpers import REPO, run_release, snapshot
from helpers.build import buildable_tags, train_wheels
from helpers.failure import failed
from helpers.reads import count_opens, count_reads, over_once
from helpers.train import load_train
from release.cli import main
from release.core.errors import TagsNotBuiltError
from release.core.faults import FAULT_ENV
from release.core.hashing import file_sha256, sha256_hex
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.pin import Pin
from release.queue.verified import read_verified

pytestmark = pytest.mark.slow


def buildable(root: Path) -> tuple[list[str], list[str]]:
    """The train's tags whose pin admits a verified FlashInfer, and the others (from the data)."""
    ok = buildable_tags(Layout(root))
    return ok, [t for t in load_train(Layout(root)).tags if t not in ok]


def build(root: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The working tree as it is (helpers.build.plan says why); refusing a dirty tree is test_dirty_build.py's.
    return run_release(root, "build", "--allow-dirty", "--out", str(out), *args)


def wheels(out: Path) -> dict[str, str]:
    return {p.name: file_sha256(p) for p in sorted(out.glob("*.whl"))} if out.is_dir() else {}


# What built_twice's build by the CLI said on stderr, by its output directory.
PROGRESS: dict[str, str] = {}


@pytest.fixture(scope="module")
def built_twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict[str, str]]:
    """Every buildable train tag built twice, into two directories: once by `build --all` in a process
    of its own (by `--tag` each where a train tag is not verified; `--all` refuses then, and
    test_build_all_builds_every_tag_it_can_and_names_each_it_cannot shows it), once by the build
    the run's other files read (helpers.build.train_wheels: the same build_train, in the test's process).

    Returns the directory of the process's build, which the tests read, and both builds' {name: sha256}."""
    ok, refused = buildable(REPO)
    assert ok, "no train tag has a verified FlashInfer: nothing to build"
    out = tmp_path_factory.mktemp("dist")
    before = snapshot(REPO)
    result = build(REPO, out, *([arg for tag in ok for arg in ("--tag", tag)] if refused else ["--all"]))
    assert result.returncode == 0, result.stdout + result.stderr
    PROGRESS[str(out)] = result.stderr
    print("\n" + result.stdout)
    assert snapshot(REPO) == before  # vendor/ and patches/ are only ever read
    return out, wheels(out), {wheel.name: file_sha256(wheel) for wheel in train_wheels(tmp_path_factory).values()}


def test_two_builds_give_one_wheel_per_tag_with_the_same_sha256(
    built_twice: tuple[Path, dict[str, str], dict[str, str]],
) -> None:
    _, first, second = built_twice
    ok, _ = buildable(REPO)
    assert len(first) == len(ok)
    assert first == second


def test_a_train_build_says_each_tag_as_it_goes(built_twice: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    """Issue 38, 9: `build --all` was silent for about 48 s: one line on stderr per tag as it is built,
    after one for the reproduction of the train."""
    out, _, _ = built_twice
    ok, _ = buildable(REPO)
    said = PROGRESS[str(out)].splitlines()
    assert any(line.startswith("build: reproducing ") for line in said), said
    lines = [line for line in said if line.startswith("build: ") and " vLLM v" in line]
    assert [line.split(" vLLM ", 1)[1].split(":", 1)[0] for line in lines] == ok, said
    assert lines[-1].startswith(f"build: {len(ok)}/{len(ok)} "), lines


def test_each_wheel_is_for_its_own_tag_only(built_twice: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    out, _, _ = built_twice
    layout = Layout(REPO)
    train = load_train(layout)
    verified = read_verified(layout.verified_toml)
    for wheel in sorted(out.glob("*.whl")):
        archive = zipfile.ZipFile(wheel)
        info = json.loads(archive.read("vllm_fused_moe/_build_info.json"))
        entry = train.get(info["vllm_tag"])
        assert entry is not None
        metadata = HeaderParser().parsestr(
            archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        )
        # `--allow-dirty` marks a checkout with uncommitted changes (e.g. right after a rebase): the
        # build info lists them, and the version says so.
        dirty = ".dirty" if info["dirty"] else ""
        # The level is the train's record of the tag (patches/train.toml `level`), never a count of the patches.
        assert metadata["Version"] == f"{entry.version}+fm.{entry.patch_level}{dirty}" == info["version"]
        requires = {Requirement(r).name: Requirement(r) for r in metadata.get_all("Requires-Dist") or []}
        assert str(requires["vllm"].specifier) == f"=={entry.version}"
        expected = verified.range_for(entry.flashinfer)
        assert expected is not None and requires["flashinfer-python"].specifier == SpecifierSet(expected)
        assert info["flashinfer_specifier"] == expected and info["flashinfer_pin"] == entry.flashinfer
        # The wheel serves exactly its line's modules (patches/lines.toml), and holds exactly the
        # patched files the train records for this tag, in its line's folder.
        line = read_lines(Layout(REPO).lines).get(entry.line)
        assert info["targets"] == line.targets(line.overlay_dir)
        folder = f"vllm_fused_moe/{line.overlay_dir}/"
        files = {n[len(folder) :]: archive.read(n) for n in archive.namelist() if n.startswith(folder)}
        assert {n: sha256_hex(d) for n, d in files.items()} == entry.patched
        assert info["files"] == {f"{line.overlay_dir}/{n}": d for n, d in entry.patched.items()}  # what the hook checks
        pin = Pin.load(_extract(archive, "vllm_fused_moe/UPSTREAM.toml", wheel.parent / f"{wheel.name}.toml"))
        assert (pin.tag, pin.files, pin.wheel_sha256) == (entry.tag, entry.pristine, entry.wheel_sha256)


def _extract(archive: zipfile.ZipFile, name: str, target: Path) -> Path:
    target.write_bytes(archive.read(name))
    return target


def test_python_m_vllm_fused_moe_in_each_wheel_says_its_own_tag(
    built_twice: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    out, _, _ = built_twice
    for wheel in sorted(out.glob("*.whl")):
        unpacked = tmp_path / wheel.stem
        zipfile.ZipFile(wheel).extractall(unpacked)
        proc = subprocess.run(
            [sys.executable, "-m", "vllm_fused_moe", "info", "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(unpacked)},
            cwd=tmp_path,
            timeout=60,
            check=True,
        )
        info = json.loads(proc.stdout)
        assert wheel.name.startswith(f"vllm_fused_moe-{info['vllm_version']}+fm.")
        assert info["vllm_tag"] == f"v{info['vllm_version']}"
        text = subprocess.run(
            [sys.executable, "-m", "vllm_fused_moe"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(unpacked)},
            cwd=tmp_path,
            timeout=60,
            check=True,
        ).stdout
        assert f"vLLM tag        {info['vllm_tag']} (pypi: vllm-{info['vllm_version']}-" in text


def test_build_all_builds_every_tag_it_can_and_names_each_it_cannot(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every train tag but the head and one other made unverifiable by hand (a vLLM bumping FlashInfer): `--all`
    # still builds those two, names each other tag with its reason, and exits 1; vendor/ and patches/ untouched.
    # Run in this process (the wheels are still PyPA builds in processes of their own), so that every read of the
    # checkout's files is counted: the command reads patches/series, lines.toml and train.toml once, whatever
    # number of tags it checks (one snapshot of the checkout, release.queue.snapshot).
    layout = Layout(project)
    train = load_train(layout)
    head = Pin.load(layout.upstream_toml).tag
    kept = [head, next(t for t in reversed(train.tags) if t != head)]
    text = layout.train.read_text()
    for entry in train.entries:
        if entry.tag not in kept:
            start = text.index(f'tag = "{entry.tag}"')
            end = text.index("[release.pristine]", start)
            pinned = text[start:end].replace(
                f'flashinfer = "{entry.flashinfer}"', 'flashinfer = "flashinfer-python==9.9.9"'
            )
            text = text[:start] + pinned + text[end:]
    layout.train.write_text(text)
    before = snapshot(project)
    out = tmp_path / "dist"
    reads, opens = count_reads(monkeypatch), count_opens(monkeypatch)
    code = main(["--root", str(project), "build", "--allow-dirty", "--out", str(out), "--all"])
    said = capsys.readouterr()
    result = subprocess.CompletedProcess[str]([], code, said.out, said.err)
    assert snapshot(project) == before
    assert result.returncode == 1, result.stdout + result.stderr
    once = {p: reads[p.resolve()] for p in (layout.series, layout.lines, layout.train)}
    assert once == dict.fromkeys(once, 1), once
    # Every other file of patches/ (each patch: the queue's, the lines', the known bugs') and vendor/'s pins at
    # most once; each wheel built read once (its sha256 and what it ships) and once more to deliver it into --out.
    assert over_once(reads, layout) == {}
    ours = {path.name: count for path, count in opens.items() if path.name.startswith("vllm_fused_moe-")}
    assert ours and max(ours.values()) <= 2, ours
    refused = [t for t in train.tags if t not in kept]
    error = failed(result)
    assert error.reference == TagsNotBuiltError.reference, result.stderr
    # Which tags, and why each, is the point: the one error line names them all.
    assert error.message.startswith(f"{len(refused)} of {len(train.tags)} train tags not built (2 wheels in {out})")
    for tag in refused:
        assert f"{tag}: {tag} pins flashinfer-python==9.9.9: no verified FlashInfer satisfies it" in error.message
    assert "build --tag TAG" in error.hint  # the way out for the others
    built = sorted(Version(name.split("-")[1]).public for name in wheels(out))
    assert built == sorted(t.removeprefix("v") for t in kept)
    for name in wheels(out):
        assert name in result.stdout  # each wheel built is reported before the error


def test_an_unverified_tag_is_refused_alone_with_exit_2(project: Path, tmp_path: Path) -> None:
    # Make the newest tag's pin unverifiable by hand, as a vLLM bumping FlashInfer would.
    layout = Layout(project)
    train = load_train(layout)
    tag = train.tags[-1]
    entry = train.get(tag)
    assert entry is not None and entry.flashinfer
    text = layout.train.read_text()
    start = text.index(f'tag = "{tag}"')
    end = text.index("[release.pristine]", start)
    layout.train.write_text(
        text[:start] + text[start:end].replace(entry.flashinfer, "flashinfer-python==9.9.9") + text[end:]
    )
    result = build(project, tmp_path / "dist", "--tag", tag)
    assert result.returncode == 2
    assert f"{tag} pins flashinfer-python==9.9.9: no verified FlashInfer satisfies it" in result.stderr
    assert wheels(tmp_path / "dist") == {}


def test_a_kill_during_build_tag_leaves_each_wheel_whole_old_or_new(
    built_twice: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    # Good wheels of two tags already in --out (built_twice's); a new build of both (another
    # SOURCE_DATE_EPOCH, so other bytes under the same names) is killed while it copies the second.
    done, good, _ = built_twice
    ok, _ = buildable(REPO)
    tags = [arg for tag in ok[:2] for arg in ("--tag", tag)]
    out = tmp_path / "dist"
    out.mkdir()
    # The wheels of the two tags, in the order the build delivers them (the order of --tag).
    names = [next(n for n in good if n.startswith(f"vllm_fused_moe-{tag.removeprefix('v')}+")) for tag in ok[:2]]
    for name in names:
        (out / name).write_bytes((done / name).read_bytes())
    env = {"SOURCE_DATE_EPOCH": "1700000000"}
    args = ("build", "--allow-dirty", "--out", str(out), *tags)
    killed = run_release(REPO, *args, env={**env, FAULT_ENV: "atomic:written@2"})
    assert killed.returncode == -9, killed.stdout + killed.stderr
    after_kill = wheels(out)
    assert set(after_kill) == set(names)
    assert after_kill[names[0]] != good[names[0]]  # the first is the new wheel, whole
    assert after_kill[names[1]] == good[names[1]]  # the second is still the good one
    hidden = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert len(hidden) == 1 and hidden[0].startswith(f".{names[1]}.tmp-"), hidden
    again = run_release(REPO, *args, env=env)
    assert again.returncode == 0, again.stderr
    assert f"note: removed {out / hidden[0]}, the partial copy of a killed build" in again.stderr
    assert wheels(out)[names[0]] == after_kill[names[0]]  # reproducible: the kill left the whole new wheel
    assert wheels(out)[names[1]] != good[names[1]]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
