"""Issue 43: the proof comes from what the checkout builds and runs, never from what a wheel or a test says.

One copy of the checkout made a git repository, one real wheel of the newest train tag of an older line built
at its commit, and two ways that published a wheel before:

- a crafted wheel (the fix undone, `_build_info.json` and RECORD rewritten to match, a `pytest11` plugin that
  turns failures into passes declared beside): publish rebuilds the wheel at the commit its build facts name
  and refuses it at its first differing member, before any test runs;
- a regression test that tells the environments apart, not the fix (it fails where VLLM_FUSED_MOE=off, how
  the pristine run is set up, and passes elsewhere): the genuine wheel, and the third run, on that wheel built
  without the bug's patch, passes too, which publish names as the run that disagreed.

The index is left as it was each time. Real processes: the CLI, git, the build, pip and pytest under this
venv's interpreter; the release wheel from the cache (or the package index once).
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from helpers import run_release, tag_facts
from helpers.failure import failed
from release.core.errors import UnprovenWheelError
from release.core.git import git
from release.core.layout import Layout
from release.evidence.runner import source_tree
from release.model.lines import read_lines
from release.queue.regression import bug_tests

pytestmark = pytest.mark.network  # the tag's release wheel: the cache, or the package index once

BUILD_INFO = "vllm_fused_moe/_build_info.json"
# What the auditor's plugin did: every failed report a pass, unless the run is the pristine one.
PLUGIN = """import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and os.environ.get("VLLM_FUSED_MOE") != "off":
        report.outcome = "passed"
"""
ENV_TEST = """import os


def test_the_fix_is_there():
    assert os.environ.get("VLLM_FUSED_MOE") != "off"
"""


def commit_all(root: Path, message: str) -> None:
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", message, cwd=root)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the project, a git repository; its wheel of the tag, built at its one commit)."""
    from helpers import copy_project

    project = copy_project(tmp_path_factory.mktemp("rebuild"))
    git("init", "-q", cwd=project)
    commit_all(project, "the checkout")
    tag = tag_facts.older_line_tag(tag_facts.train()).tag
    out = project.parent / "dist"
    made = run_release(project, "build", "--tag", tag, "--out", str(out))
    assert made.returncode == 0, made.stderr
    [wheel] = out.glob("*.whl")
    return project, wheel


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def crafted(wheel: Path, layout: Layout, out: Path) -> tuple[Path, str]:
    """`wheel` with its fix undone, its build facts and RECORD rewritten to match and a pytest11 plugin beside
    (the same name); and the first of its members, in the genuine wheel's order, that differs from it."""
    tag = f"v{wheel.name.split('-')[1].split('+')[0]}"
    entry = tag_facts.train().get(tag)
    assert entry is not None
    line = read_lines(layout.lines).get(entry.line)
    tree = source_tree(tag)
    with zipfile.ZipFile(wheel) as source:
        files = {info.filename: source.read(info) for info in source.infolist()}
    info = json.loads(files[BUILD_INFO])
    for rel in list(info["files"]):  # each served file back to vLLM's own bytes
        module = next(m for m in line.modules if m.endswith(rel.rsplit("/", 1)[-1]))
        files[f"vllm_fused_moe/{rel}"] = (tree / module).read_bytes()
        info["files"][rel] = hashlib.sha256(files[f"vllm_fused_moe/{rel}"]).hexdigest()
    files[BUILD_INFO] = (json.dumps(info, indent=2, sort_keys=True) + "\n").encode()
    dist_info = next(name.split("/")[0] for name in files if name.endswith(".dist-info/RECORD"))
    files["vllm_fused_moe_plugin.py"] = PLUGIN.encode()
    files[f"{dist_info}/entry_points.txt"] = b"[pytest11]\nfixed = vllm_fused_moe_plugin\n"
    rows = [record_line(name, data) for name, data in files.items() if not name.endswith("/RECORD")]
    files[f"{dist_info}/RECORD"] = ("\n".join([*rows, f"{dist_info}/RECORD,,"]) + "\n").encode()
    out.mkdir()
    target = out / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as made:
        genuine = [info.filename for info in source.infolist()]
        for name, data in files.items():
            made.writestr(name, data)
        first = next(name for name in genuine if source.read(name) != files[name])
    return target, first


def test_a_crafted_wheel_is_refused_at_its_first_differing_member(built: tuple[Path, Path], tmp_path: Path) -> None:
    project, wheel = built
    forged, first = crafted(wheel, Layout(project), tmp_path / "forged")
    index = tmp_path / "index"
    published = run_release(project, "publish", str(forged), str(index))
    assert published.returncode == 2, published.stdout + published.stderr
    error = failed(published)
    assert error.reference == UnprovenWheelError.reference, error
    commit = git("rev-parse", "HEAD", cwd=project).out.strip()
    tag = f"v{wheel.name.split('-')[1].split('+')[0]}"
    said = f"not publishing: {forged.name} is not the build of {tag} at commit {commit[:12]}: {first} differs"
    assert error.message == said, error
    assert not index.exists()


def test_a_test_that_tells_the_runs_apart_is_refused_naming_the_run_without_the_fix(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    project, wheel = built
    layout = Layout(project)
    tag = f"v{wheel.name.split('-')[1].split('+')[0]}"
    entry = tag_facts.train().get(tag)
    assert entry is not None
    [test] = bug_tests(layout, entry.line)
    (layout.patches / "upstream-tests" / test.path).write_text(ENV_TEST)
    commit_all(project, "a test that tells VLLM_FUSED_MOE=off from the rest")
    index = tmp_path / "index"
    published = run_release(project, "publish", str(wheel), str(index))  # the wheel of the commit before
    assert published.returncode == 2, published.stdout + published.stderr
    error = failed(published)
    assert error.reference == UnprovenWheelError.reference, error
    where = f"not publishing {wheel.name}: bug {test.bug} on vLLM {tag} (line {entry.line}), test {test.path}"
    assert error.message.startswith(f"{where}: with the wheel built without {test.patch} it passes"), error
    assert "a reason other than the fix" in error.message, error
    assert not index.exists()
