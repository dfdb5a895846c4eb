"""`scan` as a process: bad input is exit 2 with one error line, and nothing is written; a line's proven skip of
a bug's patch leaves the line's release not affected by that bug, so `check` agrees with the scan.

A bad --since or --until is refused the same way in one process (tests/unit/test_cli_main.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_release, snapshot
from helpers.failure import failed
from helpers.index_server import LoopbackIndex
from helpers.scan import FIX
from helpers.skip_proofs import record_proof
from helpers.synthetic import NEXT_TAG, SHAPE_CHECK_PATCH, add_shape_check, make_wheel, pristine
from helpers.train import load_train
from helpers.unsafe_sources import VERSION
from release.cli import main
from release.core.errors import ConfigError, ReleaseError
from release.core.hashing import file_sha256
from release.core.layout import Layout
from release.model.lines import read_lines
from release.pristine.index import INDEX_ENV
from release.queue.load import is_head
from release.queue.skip_proof import proof_path as skip_proof
from release.queue.skip_proof import skipped_bug_tests
from release.queue.snapshot import Checkout
from release.scan.run import proven_skips


@pytest.mark.parametrize(
    "args, setup, kind, message",
    [
        ([], "[[line]]\nname = 'x'\n", ConfigError, "line 'x' needs a non-empty list of module paths"),
        ([], "[[line]]\nname = 'x'\nmodules = ['../etc/']\n", ConfigError, "is not a path inside the wheel"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    project: Path, args: list[str], setup: str | None, kind: type[ReleaseError], message: str
) -> None:
    if setup is not None:
        (project / "patches" / "lines.toml").write_text(setup)
    before = snapshot(project)
    result = run_release(project, "scan", *args)
    assert result.returncode == 2, result.stderr
    error = failed(result)
    assert error.reference == kind.reference and message in error.message, result.stderr
    assert snapshot(project) == before and not (project / "docs").exists()


# A line that skips a bug's patch, its skip proven, and the releases of that line in the scan (issue 44): as
# the issue found it, on a copy of the checkout with a release of our own on an index on 127.0.0.1. The head
# line is split (docs/patch-queue.md) into a line before it, with the head's modules, that takes 0001 as it is;
# a second bug's patch (the shape check) is skipped by every older line, the new one too; and the release is
# vLLM's pinned pristine subtree under a version no real index has, so the scan puts it on the new line.
SPLIT = "prepare_finalize_split"
SECOND = "https://example.invalid/vllm-fused-moe/bugs/2 finalize accepts an output of the wrong rank"


def test_a_proven_skip_leaves_the_release_not_affected_and_check_agrees(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = Layout(project)
    text = layout.lines.read_text()
    head = next(line for line in read_lines(layout.lines).lines if is_head(layout, line))
    block = (
        f'[[line]]\nname = "{SPLIT}"\nmodules = {json.dumps(list(head.modules))}\n'
        f'markers = {json.dumps(list(head.markers))}\nseries = "patches/lines/{SPLIT}/series"\n\n'
    )
    first = text.index("[[line]]")
    layout.lines.write_text(text[:first] + block + text[first:])
    (project / "patches" / "lines" / SPLIT).mkdir()
    (project / "patches" / "lines" / SPLIT / "series").write_text(f"take {FIX}\n")
    add_shape_check(project, lines_skip=True, bug=SECOND)
    wheel = make_wheel(tmp_path / "index" / f"vllm-{VERSION}-cp38-abi3-linux_x86_64.whl", pristine(project), VERSION)
    # Every skip proven, as `evidence --line` would after clean passes: the new release, and each train tag of a
    # line that skips the shape check (`check` asks for those), each on the release wheel it names.
    cache = tmp_path / "cache"
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(cache))
    [test] = skipped_bug_tests(Checkout.load(layout), SPLIT)
    record_proof(NEXT_TAG, test, file_sha256(wheel))
    for entry in load_train(layout).entries:
        for skipped in skipped_bug_tests(Checkout.load(layout), entry.line):
            record_proof(entry.tag, skipped, entry.wheel_sha256)
    assert main(["--root", str(project), "train", "add", NEXT_TAG, "--line", SPLIT, "--from", f"wheel:{wheel}"]) == 0
    with LoopbackIndex([wheel]) as index:
        env = {"VLLM_FUSED_MOE_CACHE": str(cache), INDEX_ENV: index.url}
        scanned = run_release(project, "scan", "--since", VERSION, "--until", VERSION, env=env)
        assert scanned.returncode == 0, scanned.stdout + scanned.stderr
        entry = json.loads(layout.affected_json.read_text())["releases"][VERSION]
        assert (entry["line"], entry["patches"][SHAPE_CHECK_PATCH]) == (SPLIT, "skipped"), entry
        checked = run_release(project, "check", env=env)
        assert entry["bugs"][SECOND.split()[0]] == "not-affected", (entry, checked.stderr)  # before: affected, exit 2
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert entry["proven_skips"] == [SHAPE_CHECK_PATCH]
    # What the scan asked of each release, here without a scan: the proof stands for the release wheel it names
    # alone, and without it the skip is a claim again, which leaves the release affected (tests/unit/test_scan.py;
    # check refuses such a tag: tests/cli/test_gates.py).
    checkout = Checkout.load(layout)
    assert proven_skips(checkout, SPLIT, VERSION, file_sha256(wheel)) == [SHAPE_CHECK_PATCH]
    assert proven_skips(checkout, SPLIT, VERSION, "0" * 64) == []
    skip_proof(VERSION, test).unlink()
    assert proven_skips(checkout, SPLIT, VERSION, file_sha256(wheel)) == []
