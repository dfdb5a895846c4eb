"""The loop's one-command steps, offline, as real processes with real git: `pq drop`, and an upstream
backport taken with `git am` that keeps its own message (DEP-3 trailers, no Why / How).

`pq drop NAME`: a patch out of the queue in one command.

The patches are a test's own (helpers/synthetic.add_patch: a format-patch mail, its series line, vendor/
patched, a `skip` in every older line's series); dropping one gives back patches/ and vendor/ byte for byte
as they were before it was added, `skip`s included. A patch that a later one needs is not dropped (exit 3)
and nothing changes.
"""

from __future__ import annotations

import re
from pathlib import Path

from helpers import run_release, snapshot
from helpers.failure import failed
from helpers.synthetic import SUBTREE, add_patch
from release.core.errors import ConflictError
from release.core.git import WorkRepo
from release.core.layout import Layout, read_tree
from release.model.lines import read_lines
from release.model.series import EntryKind, Series
from release.pq.export import used_names
from release.pq.names import next_number
from release.queue.load import account, is_head, line_entries


def free_names(project: Path, *slugs: str) -> list[str]:
    """The test's own patches, numbered from the next number the copy's queue has not used (whatever it holds)."""
    first = next_number(used_names(Layout(project)))
    return [f"{first + at:04d}-{slug}.patch" for at, slug in enumerate(slugs)]


def test_drop_gives_back_the_queue_as_it_was_before_the_patch(project: Path) -> None:
    [first] = free_names(project, "mori-first")
    before = snapshot(project)
    add_patch(project, first, "mori.py", "import torch\n", "import torch  # first\n", "mori: first")
    assert snapshot(project) != before
    dropped = run_release(project, "pq", "drop", first[:4])  # by its number
    assert dropped.returncode == 0, dropped.stderr
    assert re.search(rf"(?m)^{re.escape(first)} +dropped$", dropped.stdout), dropped.stdout
    assert snapshot(project) == before
    again = run_release(project, "pq", "drop", first)
    assert again.returncode == 2 and "is not one patch of the work tree" in again.stderr, again.stderr


def test_a_patch_a_later_one_needs_is_not_dropped_and_nothing_changes(project: Path) -> None:
    first, second = free_names(project, "mori-first", "mori-second")
    add_patch(project, first, "mori.py", "import torch\n", "import torch  # first\n", "mori: first")
    add_patch(project, second, "mori.py", "import torch  # first\n", "import torch  # second\n", "mori: second")
    assert run_release(project, "pq", "import").returncode == 0
    before = snapshot(project)
    refused = run_release(project, "pq", "drop", first)
    assert refused.returncode == 3, refused.stderr
    error = failed(refused)
    assert error.reference == ConflictError.reference and refused.stderr.startswith("error["), refused.stderr
    assert error.message.startswith(f"dropping {first}: a later patch (mori: second) does not apply"), error
    assert snapshot(project) == before
    assert run_release(project, "pq", "export", "--check").returncode == 0  # the work tree is as it was


def test_a_renamed_patch_keeps_every_lines_skip_reason_and_variant(project: Path) -> None:
    # The patch renamed by its commit's Patch-Name: line in the work tree; each older line's `skip` (with its
    # reason) and one line's own variant of it (Varies:) follow the new name instead of being dropped.
    [first] = free_names(project, "mori-first")
    renamed = f"{first[:4]}-mori-renamed.patch"  # the same number, another slug
    add_patch(project, first, "mori.py", "import torch\n", "import torch  # first\n", "mori: first")
    layout = Layout(project)
    lines = [line for line in read_lines(layout.lines).lines if not is_head(layout, line)]
    # A line with a variant of the queue's first patch: its text, re-aimed, is the test's variant of first.
    common = Series.load(layout.series).names[0]
    varied = next(line for line in lines if account(line_entries(layout, line))[common].kind == EntryKind.PATCH)
    text = (varied.patch_dir(project) / account(line_entries(layout, varied))[common].name).read_text()
    variant = varied.patch_dir(project) / first  # a hand-made variant, in form only: the gates read its trailers
    variant.write_text(text.replace(f"Varies: {common}", f"Varies: {first}"))
    series = varied.series_path(project)
    series.write_text(re.sub(rf"(?m)^skip {re.escape(first)}: .*$", first, series.read_text()))
    assert run_release(project, "pq", "import").returncode == 0
    tree = WorkRepo(project / ".work" / "pq")
    message = tree.run("log", "-1", "--format=%B").out
    assert f"Patch-Name: {first}" in message
    tree.run("commit", "--quiet", "--amend", "-m", message.replace(first, renamed), fixed_date=True)
    exported = run_release(project, "pq", "export")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert f"{first} is now {renamed}" in exported.stdout + exported.stderr
    assert Series.load(layout.series).names[-1] == renamed and not (layout.patches / first).exists()
    for line in lines:
        said = line.series_path(project).read_text()
        if line is varied:  # the variant keeps its own file name; what it varies is the new name
            assert re.search(rf"(?m)^{re.escape(first)}$", said) and f"Varies: {renamed}" in variant.read_text()
        else:
            assert first not in said and f"skip {renamed}: a test's patch of the head line only" in said
    checked = run_release(project, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


BACKPORT_MESSAGE = """[Bugfix] mori: say why torch comes first

Upstream's own words: the import order matters for the extension.

Signed-off-by: An Upstream Author <author@example.com>
Origin: upstream, https://github.com/vllm-project/vllm/commit/0123456789abcdef
Applied-Upstream: v0.99.0, https://github.com/vllm-project/vllm/commit/0123456789abcdef
Bug: https://github.com/vllm-project/vllm/issues/1 the import order
Upstream-Test: tests/kernels/moe/test_mori_import_order.py
"""
# A bug patch names its regression test (pq export refuses one that does not); the backport's is upstream's.
MORI_TEST = "def test_mori_imports_torch_first():\n    import torch  # noqa: F401\n"


def test_an_upstream_commit_taken_with_git_am_keeps_its_message(project: Path, tmp_path: Path) -> None:
    vendor = project / "vendor" / "vllm_fused_moe" / "prepare_finalize"
    clone = WorkRepo.create(tmp_path / "vllm")
    base = clone.commit_subtree(read_tree(vendor), "upstream at the head's tag, our patches on it")
    mori = clone.subtree / "mori.py"
    mori.write_text(mori.read_text().replace("import torch\n", "import torch  # first: the extension needs it\n", 1))
    clone.run("commit", "--quiet", "-a", "-m", BACKPORT_MESSAGE, fixed_date=True)
    [upstream] = clone.export(base, tmp_path / "mail")

    test = project / "patches" / "upstream-tests" / "tests" / "kernels" / "moe" / "test_mori_import_order.py"
    test.write_text(MORI_TEST)
    assert run_release(project, "pq", "import").returncode == 0
    WorkRepo(project / ".work" / "pq").run("am", "--keep", str(upstream))
    exported = run_release(project, "pq", "export")
    assert exported.returncode == 0, exported.stderr
    [name] = [n for n in Series.load(project / "patches" / "series").names if "mori" in n]
    text = (project / "patches" / name).read_text()
    assert "Upstream's own words" in text and "\nWhy:" not in text and "\nApplied-Upstream: v0.99.0, " in text
    assert "# first: the extension needs it" in (vendor / "mori.py").read_text()
    layout = Layout(project)
    for line in read_lines(layout.lines).lines:
        if not is_head(layout, line):
            skipped = run_release(project, "pq", "skip", name, "--line", line.name, "--reason", "no mori.py here")
            assert skipped.returncode == 0, skipped.stderr
    # A skip of a bug's patch is a claim no run here proved (`python -m release evidence` would, under torch):
    # check refuses it, naming the bug, a tag and its line.
    checked = run_release(project, "check")
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "bug https://github.com/vllm-project/vllm/issues/1" in checked.stderr and f"skips {name}" in checked.stderr
    assert f"{SUBTREE}/mori.py" in text
