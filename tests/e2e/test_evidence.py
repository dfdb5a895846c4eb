"""Every published wheel proves its fixes: issue 35's paths end in a refusal naming the bug, the tag and the line.

Real processes on a copy of the checkout, the real release wheels (cached) and this test venv as the
interpreter the evidence runs under (torch, vLLM's import-time packages): `publish` runs each bug's
regression test on the wheel's pristine vLLM release and with the wheel installed beside it
(release/evidence). Records edited by hand (patches/train.toml's `bugs`, the scan data, a line's
`skip`, the wheel's own `_build_info.json`) no longer make a wheel without its fix publishable. The
tag is data: the newest train tag of an older release line. Every run is cached by its inputs
(~/.cache/vllm-fused-moe/evidence), so the pristine release's run is made once for the whole suite.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import run_release, tag_facts
from helpers.failure import failed
from helpers.fix import fix_patch, fix_variant
from helpers.synthetic import SHAPE_CHECK_PATCH, add_shape_check
from helpers.train import load_train
from release.core.errors import UnprovenWheelError
from release.core.layout import Layout
from release.evidence.runner import source_tree
from release.model.lines import read_lines
from release.model.train import TrainEntry

pytestmark = pytest.mark.network  # the tag's release wheel: the cache, or the package index once

BUILD_INFO = "vllm_fused_moe/_build_info.json"


def older_line_tag(layout: Layout) -> TrainEntry:
    """The newest train tag of an older release line (every test here and test_levels.py take it: its pristine
    run is made once)."""
    return tag_facts.older_line_tag(load_train(layout))


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
    # Relative DIST and INDEX_DIR, read from the caller's directory (issue 44: the wheel was looked for in the
    # run's temporary directory, so every wheel "errored" and none was proven).
    relative = [str(broken.relative_to(tmp_path)), index.name]
    published = run_release(project, "publish", "--allow-dirty", *relative, cwd=tmp_path)
    assert published.returncode == 2, published.stdout + published.stderr
    error = failed(published)
    assert error.reference == UnprovenWheelError.reference, published.stderr
    # Issue 43: refused before any test runs, as no build of the checkout (tests/e2e/test_rebuild.py).
    said = (
        f"not publishing: {broken.name}: it has no build facts"
        if text is None
        else f"not publishing: {broken.name} is not the build of {entry.tag} at this checkout's tree as it is: "
    )
    assert error.message.startswith(said) and (text is None or error.message.endswith(" differs")), error
    assert not index.exists()


def test_a_line_that_skips_the_fix_with_its_records_emptied_is_refused_until_proven(project: Path) -> None:
    """Issue 35, path 1: two patches deep, a line's series says `skip FIX: mistake` (its variant gone), the
    `bugs` of its train tags are emptied by hand and the scan data no longer lists them (`scan --since` a newer
    tag); every gate passed and the index pinned a wheel without the fix. Now `check` and `train add` refuse the
    skip without proof, and `evidence`, run here for real, cannot prove it: the test fails on the pristine release."""
    layout = Layout(project)
    entry = older_line_tag(layout)
    [bug] = entry.bugs
    common = fix_patch(project).name
    add_shape_check(project, lines_skip=False)
    carried = run_release(project, "pq", "carry", SHAPE_CHECK_PATCH)
    assert carried.returncode == 0, carried.stderr
    series = layout.patches / "lines" / entry.line / "series"
    assert SHAPE_CHECK_PATCH in series.read_text().splitlines(), carried.stdout
    for other in sorted((layout.patches / "lines").glob("*/series")):
        if SHAPE_CHECK_PATCH not in other.read_text().splitlines():
            other.write_text(other.read_text() + f"skip {SHAPE_CHECK_PATCH}: a test's patch\n")
    variant = fix_variant(entry.line, project)
    assert variant.parent == series.parent, f"{entry.line} takes {common} as it is: this test needs a variant"
    series.write_text(re.sub(rf"(?m)^{re.escape(variant.name)}\b.*$", f"skip {common}: mistake", series.read_text()))
    variant.unlink()
    train = load_train(layout)
    for on_line in train.entries:
        if on_line.line == entry.line:
            train = train.with_entry(replace(on_line, bugs=()))
    layout.train.write_text(train.dumps())
    data = json.loads(layout.affected_json.read_text())
    data["releases"] = {v: r for v, r in data["releases"].items() if r.get("line") != entry.line}
    layout.affected_json.write_text(json.dumps(data))
    before = layout.train.read_bytes()

    proved = run_release(project, "evidence", "--tag", entry.tag)  # this venv: torch; the run publish makes too
    assert proved.returncode == 2, proved.stdout + proved.stderr
    said = f"bug {bug} on vLLM {entry.tag} (line {entry.line})"
    assert f"not proven: {said}" in proved.stdout and "the release has the bug" in proved.stdout, proved.stdout
    for step in (("check",), ("train", "add", entry.tag)):
        refused = run_release(project, *step)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"bug {bug} (" in refused.stderr and f"(line {entry.line}): the line's series skips {common}" in (
            refused.stderr
        ), refused.stderr
    assert f"not adding {entry.tag}: bug {bug}" in refused.stderr, refused.stderr
    assert f"on vLLM {entry.tag} (line {entry.line})" in refused.stderr, refused.stderr
    assert layout.train.read_bytes() == before


SECOND = "https://example.invalid/vllm-fused-moe/bugs/2"
LINE_TEST = "tests/kernels/moe/test_two_sided_finalize_on_this_line.py"
LINE_TEST_TEXT = '''"""A synthetic second bug's test on an older line, which does without that bug: it passes there."""

import pytest

from vllm.model_executor.layers.fused_moe.flashinfer_nvlink_two_sided_prepare_finalize import (  # noqa: E501
    FlashInferNVLinkTwoSidedPrepareAndFinalize,
)

pytestmark = pytest.mark.cpu_test


def test_the_two_sided_class_finalizes_here():
    assert callable(FlashInferNVLinkTwoSidedPrepareAndFinalize.finalize)
'''


def test_a_skip_that_evidence_proves_lets_train_add_record_the_tag(project: Path) -> None:
    """The other side of the skip gate: a second bug's patch (the shape check, made a `Bug:` patch here) skipped
    by the older lines; `train add` of an older line's tag refuses the skip, `evidence --tag` runs the line's test
    of that bug on the pristine release for real (a clean pass: the release does without it) and writes the proof,
    and `train add` then records the tag. The test's text is new on every run (a token in it), so no proof or run
    of an earlier run of this test stands for this one."""
    layout = Layout(project)
    entry = older_line_tag(layout)
    add_shape_check(project, lines_skip=True, bug=f"{SECOND} a synthetic second bug")
    text = f"# run {uuid.uuid4().hex}\n{LINE_TEST_TEXT}"
    (layout.patches / "upstream-tests" / LINE_TEST).write_text(text)
    index = layout.patches / "upstream-tests" / "tests.toml"
    table = f"[lines.{entry.line}]\n"
    assert table in index.read_text()
    index.write_text(index.read_text().replace(table, f'{table}"{SHAPE_CHECK_PATCH}" = "{LINE_TEST}"\n'))

    refused = run_release(project, "train", "add", entry.tag)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = f"bug {SECOND} (a synthetic second bug) on vLLM {entry.tag} (line {entry.line})"
    assert f"not adding {entry.tag}: {said}: the line's series skips {SHAPE_CHECK_PATCH}" in refused.stderr, (
        refused.stderr
    )
    proved = run_release(project, "evidence", "--tag", entry.tag)
    assert proved.returncode == 0, proved.stdout + proved.stderr
    assert f"proven: bug {SECOND} on vLLM {entry.tag} (line {entry.line}), test {LINE_TEST}" in proved.stdout
    added = run_release(project, "train", "add", entry.tag)
    assert added.returncode == 0, added.stdout + added.stderr


SERVED_TEST = '''"""Where the class the line's fix changes comes from: our overlay's file, or vLLM's own."""
import importlib
import inspect


def test_the_class_is_the_overlays():
    module = importlib.import_module({module!r})
    source = inspect.getsourcefile(getattr(module, {cls!r}))
    assert "vllm_fused_moe" in source.split("site-packages")[-1], source
'''


def test_a_forked_wheel_run_is_served_by_the_wheels_hook_and_the_pristine_run_is_not(
    project: Path, tmp_path: Path
) -> None:
    """The runs are forked from a server that imported torch once (release/evidence/forkserver.py): the wheel run
    must still see the wheel as a user installs it (its .pth hook serving our file under vLLM's name) and the
    pristine run vLLM's own file. Both runs here go through the server (the second reuses it)."""
    from release.evidence import envs, forkserver, runner

    layout = Layout(project)
    entry = older_line_tag(layout)
    line = read_lines(layout.lines).get(entry.line)
    built = run_release(project, "build", "--tag", entry.tag, "--allow-dirty", "--out", str(tmp_path / "dist"))
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("*.whl")
    python = envs.for_line(layout, entry.line).python
    text = SERVED_TEST.format(module=line.live_module, cls=line.live_classes[0])
    assert forkserver.enabled()
    with runner.work_dir() as work:
        pristine = runner.run_test(python, runner.source_tree(entry.tag), "tests/test_served.py", text, work)
    with runner.work_dir() as work:
        venv_python, problem = runner.wheel_venv(python, entry.tag, wheel, work)
        assert not problem, problem
        installed = runner.run_test(venv_python, None, "tests/test_served.py", text, work)
    assert forkserver._idle.get(python), "the runs were not forked from a server"
    assert pristine[0] == runner.FAILED and "vllm_fused_moe" not in pristine[2], pristine
    assert installed[0] == runner.PASSED, installed
