"""Small, offline upstream sources for the hardening tests: real files, real zip, real git.

Also `demo_wheel`, a tiny real wheel to publish.

The files are vLLM's own: the pinned pristine subtree is recovered from vendor/ by undoing
the series (what `check` does), so no network and no release wheel is needed. A "next tag"
is that tree with a line inserted at the top of every module, which moves every patch's
context (so a rebase refreshes each patch) without touching any patched line.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.model.pin import Pin
from release.queue.drift import drift
from release.queue.load import Queue

SUBTREE = UPSTREAM_SUBTREE


def _next_tag() -> str:
    """vX.Y.99 of the head's vX.Y.Z: a tag no real source has (these tests never reach the network), and
    newer than the head wherever vendor/ is, since `rebase` refuses an older tag without --allow-older."""
    major, minor, _ = Pin.load(Layout.default().upstream_toml).tag.removeprefix("v").split(".", 2)
    return f"v{major}.{minor}.99"


NEXT_TAG = _next_tag()


def pristine(project: Path) -> dict[str, bytes]:
    """The pinned tag's pristine subtree, recovered from the project's vendor/."""
    layout = Layout(project)
    found, files = drift(layout, Queue.load(layout))
    assert not found, found
    return files


def next_tree(project: Path) -> dict[str, bytes]:
    """The pristine tree as a later tag would have it: one comment line more in every module."""
    return {
        name: (b"# moved by upstream\n" + data if name.endswith(".py") else data)
        for name, data in pristine(project).items()
    }


def version_file(version: str) -> bytes:
    # What setuptools-scm writes into vllm/_version.py of a vLLM install.
    return f"__version__ = version = '{version}'\n__version_tuple__ = version_tuple = (0, 0, 0)\n".encode()


def make_dir(root: Path, files: dict[str, bytes], version: str | None = None) -> Path:
    """A tree laid out like vLLM's: PATH/vllm/model_executor/.../prepare_finalize/ (+ vllm/_version.py)."""
    for name, data in files.items():
        target = root / SUBTREE / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if version is not None:
        (root / "vllm" / "_version.py").write_bytes(version_file(version))
    (root / "requirements").mkdir(parents=True, exist_ok=True)
    (root / "requirements" / "cuda.txt").write_text("flashinfer-python==0.6.8.post1\n")
    return root


def make_wheel(
    path: Path,
    files: dict[str, bytes],
    version: str | None,
    raw_members: list[tuple[zipfile.ZipInfo | str, bytes]] | None = None,
) -> Path:
    """A wheel-shaped zip: the subtree, METADATA (unless version is None), any raw members as given,
    and a RECORD that lists every member with its sha256 (as a real wheel's does), so what the
    reader refuses is the attack itself, not a missing hash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    members: list[tuple[zipfile.ZipInfo | str, bytes]] = [(f"{SUBTREE}/{n}", d) for n, d in sorted(files.items())]
    dist_info = f"vllm-{version or '0'}.dist-info"
    if version is not None:
        metadata = f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
        metadata += "Requires-Dist: flashinfer-python==0.6.8.post1\n"
        members.append((f"{dist_info}/METADATA", metadata.encode()))
    members += raw_members or []
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for info, data in members:
        name = info.filename if isinstance(info, zipfile.ZipInfo) else info
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([name, f"sha256={digest}", len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            archive.writestr(info, data)
        archive.writestr(f"{dist_info}/RECORD", record.getvalue())
    return path


def make_git(path: Path, tags: dict[str, dict[str, bytes]]) -> Path:
    """A vLLM-shaped git repository with one commit and tag per entry, oldest first."""
    repo = WorkRepo.create(path)
    (path / "requirements").mkdir(exist_ok=True)
    (path / "requirements" / "cuda.txt").write_text("flashinfer-python==0.6.8.post1\n")
    repo.run("add", "requirements")
    for tag, files in tags.items():
        repo.commit_subtree(files, f"release {tag}")
        repo.run("tag", tag)
    return path


def patch_message(subject: str, bug: str = "") -> str:
    """A commit message in the shape every patch of the queue has (Why / How / Related PR / Future plan and
    the trailers `Patch.validate_message` asks for), for a test's own patch; `bug`: "ID TITLE" of the bug it
    fixes (its `Bug:` trailer), else it is a downstream change."""
    purpose = f"Bug: {bug}" if bug else "Downstream: a test's change, never shipped"
    return (
        f"{subject}\n\nWhy: a test needs a patch here.\n\nHow: {subject}.\n\nRelated PR: none, a test's patch."
        f"\n\nFuture plan: none; the test throws it away.\n\nOrigin: vendor, test\n{purpose}\n"
        "Depends-On: nothing\nRisk: none\n"
    )


def add_patch(
    project: Path, name: str, file: str, old: str, new: str, message: str, lines_skip: bool = True, bug: str = ""
) -> str:
    """Add a patch to the project's queue (format-patch mail, series line) and apply it to vendor/.

    `old` is replaced by `new` in `file` (relative to the subtree); `old == ""` creates `file` as `new`.
    `lines_skip`: every older release line's series says `skip NAME: ...` (a line silent about a common
    patch is refused by check); False leaves them silent.
    """
    from release.core.layout import read_tree

    vendor = project / "vendor" / "vllm_fused_moe" / "prepare_finalize"
    work = WorkRepo.create(project.parent / f"make-{name}")
    base = work.commit_subtree(read_tree(vendor), "vendor/ as it is")
    target = work.subtree / file
    if old:
        text = target.read_text()
        assert old in text, (file, old)
        target.write_text(text.replace(old, new, 1))
    else:
        target.write_text(new)
    work.run("add", "--all")
    work.run("commit", "-q", "-m", patch_message(message, bug), fixed_date=True)
    mail = work.export(base, project.parent / f"out-{name}")[0]
    (project / "patches" / name).write_text(mail.read_text())
    with (project / "patches" / "series").open("a") as series:
        series.write(name + "\n")
    if lines_skip:
        for line_series in sorted((project / "patches" / "lines").glob("*/series")):
            with line_series.open("a") as series:
                series.write(f"skip {name}: a test's patch of the head line only\n")
    (vendor / file).write_bytes(target.read_bytes())
    return name


def demo_wheel(directory: Path, version: str, build_info: dict[str, object] | None = None) -> Path:
    """A tiny real wheel named like ours (`vllm-fused-moe`, which `publish` alone takes), enough for an
    index: name, METADATA, RECORD. Not an overlay: it installs nothing that activates. `build_info`: the
    `_build_info.json` it says it was built with (what publish's gates read: the vLLM release, the patches)."""
    path = directory / f"vllm_fused_moe-{version}-py3-none-any.whl"
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("vllm_fused_moe/__init__.py", f"VERSION = {version!r}\n")
        if build_info is not None:
            archive.writestr("vllm_fused_moe/_build_info.json", json.dumps({"version": version, **build_info}))
        info = f"vllm_fused_moe-{version}.dist-info"
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: vllm-fused-moe\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", "")
    return path


SHAPE_CHECK_PATCH = "0002-shape-check.patch"
SHAPE_CHECK = '        assert output.dim() == 2, f"finalize: output is {tuple(output.shape)}, not (tokens, hidden)"\n'


# The regression test of the shape check as a bug's fix (issue 36's second bug): on a release without the
# check, finalize goes on to FlashInfer's combine with no all-to-all manager (an AttributeError: a clean
# fail); with it, the wrong rank is refused first. vLLM's names: it runs in vLLM's checkout (release/evidence).
SHAPE_CHECK_TEST = "tests/kernels/moe/test_flashinfer_nvlink_finalize_output_rank.py"
SHAPE_CHECK_TEST_TEXT = """import pytest
import torch

from vllm.model_executor.layers.fused_moe.prepare_finalize.flashinfer_nvlink_two_sided import (  # noqa: E501
    FlashInferNVLinkTwoSidedPrepareAndFinalize,
)

pytestmark = pytest.mark.cpu_test


def test_finalize_refuses_an_output_of_the_wrong_rank():
    prepare_finalize = object.__new__(FlashInferNVLinkTwoSidedPrepareAndFinalize)
    output = torch.zeros(2, 3, 4)
    topk_ids = torch.zeros(2, 1, dtype=torch.int32)
    with pytest.raises(AssertionError, match="not \\\\(tokens, hidden\\\\)"):
        prepare_finalize.finalize(output, torch.zeros(2, 4), torch.ones(2, 1), topk_ids, False, None)
"""


def add_regression_test(project: Path, patch: str, path: str, text: str) -> None:
    """`text` as the regression test of `patch`'s bug: its file under patches/upstream-tests/ at `path` (vLLM's
    checkout), named in tests.toml's [tests] table (release/queue/regression.py)."""
    where = project / "patches" / "upstream-tests"
    (where / path).parent.mkdir(parents=True, exist_ok=True)
    (where / path).write_text(text)
    index = where / "tests.toml"
    header = "[tests]\n"
    current = index.read_text()
    assert header in current, "tests.toml has no [tests] table"
    index.write_text(current.replace(header, f'{header}"{patch}" = "{path}"\n', 1))


def add_shape_check(project: Path, lines_skip: bool = False, bug: str = "") -> str:
    """The issue's downstream 0002: a shape check as the first statement of the two-sided `finalize`, added to
    the project's series and vendor/ (a test's own patch, never committed to the series); the older release
    lines stay silent about it unless `lines_skip`. `bug` ("ID TITLE"): it fixes that bug instead (issue 36's
    second bug, which no upstream release fixes), with its regression test (SHAPE_CHECK_TEST)."""
    import re

    if bug:
        add_regression_test(project, SHAPE_CHECK_PATCH, SHAPE_CHECK_TEST, SHAPE_CHECK_TEST_TEXT)

    two_sided = "flashinfer_nvlink_two_sided.py"
    text = (project / "vendor" / "vllm_fused_moe" / "prepare_finalize" / two_sided).read_text()
    match = re.search(r"    def finalize\(.*?\n\s*\) -> None:\n", text, re.S)
    assert match is not None, "the two-sided class has no finalize"
    anchor = match.group(0)
    return add_patch(
        project,
        SHAPE_CHECK_PATCH,
        two_sided,
        anchor,
        anchor + SHAPE_CHECK,
        "fused_moe: shape check in finalize",
        lines_skip,
        bug,
    )


def impostor(directory: Path, project: str, version: str) -> Path:
    """A real wheel of `project` that is not the real thing; importing it shows it (`IMPOSTOR`)."""
    package = project.replace("-", "_")
    dist_info = f"{package}-{version}.dist-info"
    files = {
        f"{package}/__init__.py": f"IMPOSTOR = True\n__version__ = {version!r}\n".encode(),
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\nRequires-Python: >=3.10\n"
        ).encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for name, data in files.items()
    )
    files[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{package}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path
