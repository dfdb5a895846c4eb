"""The release train (patches/train.toml): add, remove, list, check, and the head moving with rebase.

Every command runs as a real `python -m release` process on a copy of the project, with
the real release wheels (cached under ~/.cache/vllm-fused-moe/wheels) and real git.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from helpers import REPO, run_release, snapshot, tag_facts
from helpers.bad_train import BAD_TRAIN, SAYS
from helpers.failure import failed
from helpers.synthetic import version_file
from helpers.train import load_train
from release.core.errors import TrainDriftError, TrainFileError, TrainRefusedError
from release.core.layout import Layout, read_tree
from release.core.versions import version_of_tag
from release.model.source import Source
from release.model.train import Train
from release.pristine.sources import fetch
from release.queue.load import Queue

pytestmark = pytest.mark.network  # every train tag's release wheel: from the package index once, then the cache

TWO_SIDED = "flashinfer_nvlink_two_sided.py"
# A release that already has the fix (tests/releases.toml): nothing to ship for it.
FIXED = tag_facts.fixed_upstream()
# The FlashInfer all-to-all module of each release line: the file a line's series patches.
A2A_FILE = re.compile(r"flashinfer_(nvlink_(one|two)_sided|a2a_prepare_finalize|cutlass_prepare_finalize)")
# Where no source may be reached: `train check` must not need the network when wheels are cached.
# (pip for whole wheels; VLLM_FUSED_MOE_INDEX_URL for the range reader of `--from pypi`.)
NOWHERE = "http://127.0.0.1:9/simple/"
OFFLINE = {
    "PIP_INDEX_URL": NOWHERE,
    "PIP_NO_INDEX": "1",
    "PIP_CONFIG_FILE": "/dev/null",
    "VLLM_FUSED_MOE_INDEX_URL": NOWHERE,
}


def train_of(root: Path) -> Train:
    return load_train(Layout(root))


def head_of(root: Path) -> str:
    return Queue.load(Layout(root)).pin.tag


def set_hash(root: Path, tag: str, table: str, name: str, digest: str) -> None:
    """Hand-edit one recorded sha256 in train.toml, as a person with an editor would."""
    path = Layout(root).train
    text = path.read_text()
    start = text.index(f'tag = "{tag}"')
    section = text.index(f"[release.{table}]", start)
    line = re.compile(rf'^"{re.escape(name)}" = "[0-9a-f]{{64}}"$', re.M).search(text, section)
    assert line is not None
    path.write_text(text[: line.start()] + f'"{name}" = "{digest}"' + text[line.end() :])


def test_list_names_every_tag_marks_the_head_and_gives_each_its_flashinfer_range(project: Path) -> None:
    table = run_release(project, "train", "list")
    assert table.returncode == 0, table.stderr
    listed = [line.split()[0] for line in table.stdout.splitlines()[1:] if line.startswith("v")]
    assert listed == train_of(project).tags
    assert f"{head_of(project)} *" in table.stdout
    data = json.loads(run_release(project, "train", "list", "--json").stdout)
    assert data["head"] == head_of(project)
    assert [r["tag"] for r in data["releases"]] == train_of(project).tags
    for row in data["releases"]:
        # A tag's wheel range is its own pin narrowed to what VERIFIED.toml lists, or null (not built).
        assert row["flashinfer_range"] in (None, row["flashinfer_pin"].removeprefix("flashinfer-python"))
        assert row["patched_files"] and all(A2A_FILE.search(name) for name in row["patched_files"])


def test_check_reproduces_every_tag_offline(project: Path) -> None:
    result = run_release(project, "train", "check", env=OFFLINE)
    assert result.returncode == 0, result.stdout + result.stderr
    oks = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("ok ")]
    assert oks == train_of(project).tags
    print("\n" + result.stdout)
    # An unchanged series is replayed once (release/queue/replay_cache.py): checked again, every tag still
    # reproduces, and no tag's replay runs git (`-v` shows every git command).
    again = run_release(project, "-v", "train", "check", env=OFFLINE)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [line.split()[1] for line in again.stdout.splitlines() if line.startswith("ok ")] == oks
    replayed = [line for line in again.stderr.splitlines() if line.startswith(("git init", "git am", "git commit"))]
    assert replayed == []


def test_a_hand_edited_hash_fails_naming_the_tag_and_the_file(project: Path) -> None:
    # Not the head: its files are also compared with vendor/, which would add lines. Checked beside a tag of
    # another line, not the whole train: every tag reproducing is test_check_reproduces_every_tag_offline's.
    tags = train_of(project).tags
    tag = [t for t in tags if t != head_of(project)][-1]
    other = tags[0]
    set_hash(project, tag, "patched", TWO_SIDED, "0" * 64)
    set_hash(project, tag, "pristine", "batched.py", "f" * 64)
    result = run_release(project, "train", "check", other, tag)
    assert result.returncode == 1
    fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 2, result.stdout
    assert f"{tag}  patched  {TWO_SIDED}" in fails[0] + fails[1]
    assert f"{tag}  pristine batched.py" in fails[0] + fails[1]
    others = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("ok ")]
    assert others == [other]
    error = failed(result)
    assert error.reference == TrainDriftError.reference and result.stderr.startswith("error[") and error.hint
    # Which tag and which files is the point: the one line names them.
    assert error.message == (
        f"train check: 1 of 2 tags do not reproduce their recorded hashes: {tag} (batched.py, {TWO_SIDED})"
    )


def test_a_hand_edit_to_a_patch_fails_for_every_tag_naming_the_file_and_the_patch(project: Path) -> None:
    layout = Layout(project)
    patch = layout.patches / Queue.load(layout).series.names[0]
    text = patch.read_text()
    assert "+        return True\n" in text
    patch.write_text(text.replace("+        return True\n", "+        return True  # edited\n", 1))
    # The head line's tags take patches/series itself; the other lines take their own variants.
    train = train_of(project)
    head = train.get(head_of(project))
    assert head is not None
    tags = [e.tag for e in train.entries if e.line == head.line]
    result = run_release(project, "train", "check", tags[0], tags[-1])
    assert result.returncode == 1
    for tag in (tags[0], tags[-1]):
        line = next(x for x in result.stdout.splitlines() if x.startswith(f"FAIL  {tag}  patched"))
        assert f"(patched by {patch.name})" in line
        assert re.search(r"flashinfer_nvlink_(one|two)_sided\.py", line)


def test_add_refuses_a_tag_whose_fix_is_upstream_and_changes_nothing(project: Path) -> None:
    before = snapshot(project)
    result = run_release(project, "train", "add", FIXED)
    assert result.returncode == 2
    error = failed(result)
    assert error.reference == TrainRefusedError.reference and "Traceback" not in result.stderr, result.stderr
    assert f"fixed upstream in {FIXED}; no overlay needed" in error.message, error
    assert snapshot(project) == before


def test_add_refuses_a_tag_where_a_patch_conflicts(project: Path, tmp_path: Path) -> None:
    # A tree laid out like vLLM's: the newest train tag, with the patched line rewritten upstream-style.
    tag = train_of(project).tags[-1]
    tree = fetch(tag, Source.parse("pypi"))
    source = tmp_path / "vllm"
    subtree = source / "vllm/model_executor/layers/fused_moe/prepare_finalize"
    subtree.mkdir(parents=True)
    for name, data in tree.files.items():
        (subtree / name).write_bytes(data)
    target = subtree / TWO_SIDED
    text = target.read_text()
    assert text.count("        return False\n") >= 1
    target.write_text(text.replace("        return False\n", "        return bool(0)\n"))
    # A dir: source proves its version as an installed vLLM does (setuptools-scm's _version.py).
    (source / "vllm" / "_version.py").write_bytes(version_file(tag.removeprefix("v")))
    before = snapshot(project)
    result = run_release(project, "train", "add", tag, "--from", f"dir:{source}")
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"conflicts on {tag} in {TWO_SIDED}" in result.stderr
    assert snapshot(project) == before


def test_a_tag_on_no_release_line_is_bad_input_and_changes_nothing(project: Path) -> None:
    # The other bad input of `train` (not a tag, the head, not in the train, named twice, ...) is
    # tests/unit/test_cli_main.py's, through the same main() in one process; this one starts git.
    before = snapshot(project)
    outside = tag_facts.on_no_line()  # a real release older than every line, so in no train either
    result = run_release(project, "train", "add", outside)
    assert result.returncode == 2 and f"{outside}: it is on no release line" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(project) == before


def test_remove_then_add_gives_back_the_same_bytes(project: Path) -> None:
    layout = Layout(project)
    original = layout.train.read_bytes()
    tag = next(t for t in train_of(project).tags if t != head_of(project))
    assert run_release(project, "train", "remove", tag).returncode == 0
    assert tag not in train_of(project).tags
    added = run_release(project, "train", "add", tag)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(f"added {tag} (line "), added.stdout
    assert layout.train.read_bytes() == original
    again = run_release(project, "train", "add", tag)
    assert again.stdout.startswith(f"re-recorded (unchanged) {tag}")
    assert layout.train.read_bytes() == original
    every = run_release(project, "train", "add", "--all")
    assert every.returncode == 0, every.stderr
    assert every.stdout.count("re-recorded (unchanged) ") == len(train_of(project).tags)
    assert layout.train.read_bytes() == original


def test_rebase_moves_the_head_entry_in_the_same_swap(project: Path, tmp_path: Path) -> None:
    layout = Layout(project)
    old_head = head_of(project)
    new_head = next(t for t in reversed(train_of(project).tags) if t != old_head)
    assert run_release(project, "train", "remove", new_head).returncode == 0
    result = run_release(
        project, "rebase", new_head, "--from", "pypi", "--allow-older", "--report", str(tmp_path / "r")
    )
    assert result.returncode == 0, result.stderr
    train = train_of(project)
    assert head_of(project) == new_head and new_head in train.tags and old_head in train.tags
    entry = train.get(new_head)
    assert entry is not None
    assert entry.pristine == Queue.load(layout).pin.files
    vendor = read_tree(layout.subtree)
    from release.core.hashing import sha256_hex

    assert entry.patched == {name: sha256_hex(data) for name, data in vendor.items()}
    checked = run_release(project, "train", "check", old_head, new_head)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_rebase_that_retires_a_patch_says_which_train_tags_keep_replaying_it(project: Path, tmp_path: Path) -> None:
    result = run_release(project, "rebase", FIXED, "--from", "pypi", "--report", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    others = [t for t in train_of(project).tags if t != FIXED]
    assert f"every train tag older than {FIXED} still replays it: {', '.join(others)}" in result.stderr
    assert FIXED in train_of(project).tags  # the head, carrying nothing: the only tag that may
    fixed = train_of(project).get(FIXED)
    assert fixed is not None and fixed.patches == ()


def test_a_missing_train_file_is_bad_input(project: Path) -> None:
    shutil.copyfile(Layout(project).train, project / "train.bak")
    Layout(project).train.unlink()
    result = run_release(project, "train", "list")
    assert result.returncode == 2 and "train.toml is missing" in result.stderr


@pytest.mark.parametrize("bad", BAD_TRAIN)
def test_every_reader_refuses_a_train_file_the_tool_would_not_write(project: Path, tmp_path: Path, bad: str) -> None:
    layout = Layout(project)
    original = layout.train.read_text()
    layout.train.write_text(BAD_TRAIN[bad](original))
    assert layout.train.read_text() != original
    before = snapshot(project)
    other = next(t for t in reversed(train_of(REPO).tags) if t != head_of(project))
    commands = [
        ("train", "list"),
        ("train", "check"),
        ("train", "remove", other),
        ("rebase", other, "--from", "pypi", "--report", str(tmp_path / "report")),
        ("build", "--all", "--allow-dirty", "--out", str(tmp_path / "dist")),
        ("build", "--allow-dirty", "--out", str(tmp_path / "dist")),
    ]
    for command in commands:
        result = run_release(project, *command, env=OFFLINE)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        error = failed(result)
        assert len(result.stderr.splitlines()) == 2 and error.reference == TrainFileError.reference, (command, error)
        assert str(layout.train) in error.message and SAYS[bad] in error.message, (command, error)
        assert "patches/train.toml" in error.hint and "UPSTREAM.toml" not in error.hint, error
        assert snapshot(project) == before and not (tmp_path / "dist").exists(), command


# ------------------------------------------------------------------------- watch


def scan_document(releases: dict[str, tuple[str, str]], patch: str) -> dict[str, object]:
    """A `release scan --json` document (schema 1, docs/affected-releases.schema.json) for these
    releases: {version: (status, state of the patch)}; the watch reads only these keys."""
    return {
        "schema": 1,
        "generated_by": "python -m release scan",
        "scanned": list(releases),
        "newest_scanned": list(releases)[-1],
        "fixed_in": None,
        "patches": {patch: {"subject": "x", "first_upstream": None}},
        "releases": {
            version: {"status": status, "line": "prepare_finalize", "patches": {patch: state}, "in_train": False,
                      "wheel": f"vllm-{version}-cp38-abi3-manylinux_2_35_x86_64.whl", "flashinfer": ""}
            for version, (status, state) in releases.items()
        },
    }  # fmt: skip


def test_watch_adds_new_affected_releases_and_reports_the_fixed_ones(project: Path, tmp_path: Path) -> None:
    layout = Layout(project)
    patch = Queue.load(layout).series.names[0]
    tags = train_of(project).tags
    if head_of(project) in tags[-2:]:
        # The head never leaves the train: move the copy's head to the oldest tag of its line first
        # (a rebase stays on the head's release line).
        head_line = next(e.line for e in train_of(project).entries if e.tag == head_of(project))
        oldest = next(e.tag for e in train_of(project).entries if e.line == head_line)
        moved = run_release(project, "rebase", oldest, "--from", "pypi", "--allow-older")
        assert moved.returncode == 0, moved.stderr
    head = head_of(project)
    # The two newest tags leave the train, as if vLLM had just published them.
    new = [t for t in tags if t != head][-2:]
    for tag in new:
        assert run_release(project, "train", "remove", tag).returncode == 0
    newest = train_of(project).tags[-1]
    document = scan_document(
        {
            newest[1:]: ("affected", "applies"),  # not newer than the newest train tag: left alone
            new[0][1:]: ("affected", "applies"),
            new[1][1:]: ("affected", "applies"),
            version_of_tag(FIXED): ("fixed", "upstream"),
        },
        patch,
    )
    scan = tmp_path / "scan.json"
    scan.write_text(json.dumps(document))
    result = run_release(project, "train", "watch", str(scan), "--report", str(tmp_path / "watch.md"))
    assert result.returncode == 0, result.stderr
    assert train_of(project).tags == tags
    assert f"{new[0]}: affected; added to the train" in result.stdout
    assert f"{FIXED}: upstream (fixed upstream in {FIXED}; no overlay needed)" in result.stdout
    report = json.loads((tmp_path / "watch.json").read_text())
    assert report["added"] == new and report["upstream"] == [FIXED] and report["refused"] == {}
    assert f"release train: vLLM releases after {newest}".lower() in (tmp_path / "watch.md").read_text().lower()
    assert run_release(project, "train", "check", *new).returncode == 0


def test_watch_lets_the_replay_decide_when_the_scan_says_applies(project: Path, tmp_path: Path) -> None:
    # The scan is input: a release it calls affected still goes through train add's own replay.
    patch = Queue.load(Layout(project)).series.names[0]
    scan = tmp_path / "scan.json"
    scan.write_text(json.dumps(scan_document({version_of_tag(FIXED): ("affected", "applies")}, patch)))
    before = Layout(project).train.read_bytes()
    result = run_release(project, "train", "watch", str(scan), "--report", str(tmp_path / "watch.md"))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "watch.json").read_text())
    assert report["added"] == [] and f"fixed upstream in {FIXED}" in report["refused"][FIXED]
    assert Layout(project).train.read_bytes() == before


def test_watch_refuses_a_document_that_is_not_a_scan(project: Path, tmp_path: Path) -> None:
    bad = tmp_path / "scan.json"
    bad.write_text(json.dumps({"schema": 99}))
    result = run_release(project, "train", "watch", str(bad))
    assert result.returncode == 2 and "is not a scan document of schema 1" in result.stderr
