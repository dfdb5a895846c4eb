"""The patch editing loop, `python -m release pq`, as real processes with real git on a copy of the checkout.

The maintainer's side is plain git run as docs/patch-queue.md writes it, with an empty git configuration
(theirs is theirs, not ours to test) and two test doubles for a person at the keyboard:
GIT_EDITOR, a script that answers the template's questions, and GIT_SEQUENCE_EDITOR, a script
that reorders or drops the lines of `git rebase -i`. `${EDITOR:-vi} FILE` in a documented block is the
test's own edit of FILE: a shape check in the two-sided `finalize`, the synthetic second patch
(never committed to the series).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import REPO, run_release, snapshot
from helpers.failure import failed
from helpers.fix import fix_patch
from helpers.train import load_train
from release.core.errors import MalformedPatchError, PatchQueueStaleError, PatchQueueTreeError
from release.core.git import files_at
from release.core.hashing import sha256_hex
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.series import EntryKind, Series
from release.pq.export import used_names
from release.pq.names import next_number
from release.queue.load import account, is_head, line_entries

FIX = fix_patch().name  # the queue's first bug fix (helpers/fix.py), whatever its name
NEW = "0002-shape-check.patch"
# The number `pq export` gives the next new patch of this queue (of the project copy alike): one above its highest.
NEXT = f"{next_number(used_names(Layout(REPO))):04d}"
TWO_SIDED = f"{UPSTREAM_SUBTREE}/flashinfer_nvlink_two_sided.py"
VENDOR_TWO_SIDED = "vendor/vllm_fused_moe/prepare_finalize/flashinfer_nvlink_two_sided.py"
SHAPE_CHECK = '        assert output.dim() == 2, f"finalize: output is {tuple(output.shape)}, not (tokens, hidden)"\n'

# GIT_EDITOR: what a maintainer types into the template (a downstream change: Bug: goes, Downstream: stays).
ANSWERS = {
    "subject": "fused_moe: check the output's shape in the two-sided finalize",
    "Why": "a combine that returned another shape would be copied into the output without a word.",
    "How": "assert that the output is (tokens, hidden) before the copy.",
    "Related PR": "none: a downstream check.",
    "Future plan": "keep it downstream while we carry the two-sided class.",
    "Origin": "vendor",
    "Downstream": "a check we keep downstream; no user-visible bug behind it",
    "Depends-On": "none",
    "Risk": "an assert on the finalize path; tests/contract runs it",
    "Forwarded": "no",
}
FILL = f"""import re, sys
answers = {ANSWERS!r}
path = sys.argv[1]
lines = []
for line in open(path, encoding="utf-8").read().splitlines():
    if line.startswith("Bug:"):
        continue
    if re.fullmatch(r"<[^>]*>", line):
        line = answers["subject"]
    line = re.sub(r"^([A-Za-z][A-Za-z -]*): <.*>$", lambda m: m.group(1) + ": " + answers[m.group(1)], line)
    lines.append(line)
open(path, "w", encoding="utf-8").write("\\n".join(lines) + "\\n")
"""
# GIT_SEQUENCE_EDITOR: move the last pick of `git rebase -i` first (`last-first`) or back (`first-last`), or
# `drop` the shape check.
SEQUENCE = """import sys
mode, path = sys.argv[1], sys.argv[2]
lines = open(path, encoding="utf-8").read().splitlines()
picks = [line for line in lines if line.startswith("pick ")]
rest = [line for line in lines if not line.startswith("pick ")]
if mode == "last-first":
    picks.insert(0, picks.pop())
elif mode == "first-last":
    picks.append(picks.pop(0))
else:
    picks = ["drop" + line[4:] if "shape" in line else line for line in picks]
open(path, "w", encoding="utf-8").write("\\n".join(picks + rest) + "\\n")
"""


def maintainer(tmp_path: Path, sequence: str = "last-first") -> dict[str, str]:
    """The environment of the maintainer's own git: an empty configuration, an identity, the two editors.

    HOME stays: the release wheel cache lives under it (~/.cache/vllm-fused-moe), and `train add --all`
    reads every tag from there.
    """
    (tmp_path / "gitconfig").write_text("")
    (tmp_path / "fill.py").write_text(FILL)
    (tmp_path / "sequence.py").write_text(SEQUENCE)
    return {
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "A Maintainer",
        "GIT_AUTHOR_EMAIL": "maintainer@example.com",
        "GIT_COMMITTER_NAME": "A Maintainer",
        "GIT_COMMITTER_EMAIL": "maintainer@example.com",
        "GIT_EDITOR": f"{sys.executable} {tmp_path / 'fill.py'}",
        "GIT_SEQUENCE_EDITOR": f"{sys.executable} {tmp_path / 'sequence.py'} {sequence}",
    }


def git(project: Path, env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["git", *args], cwd=project, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 or not check, (args, result.stdout, result.stderr)
    return result


def shape_check(path: Path) -> None:
    """The test's edit (`${EDITOR:-vi} FILE`): assert the output's shape first thing in `finalize`."""
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("    def finalize("))
    body = next(i for i in range(at, len(lines)) if re.match(r"^\s*\) -> None:\s*$", lines[i])) + 1
    path.write_text("".join([*lines[:body], SHAPE_CHECK, *lines[body:]]))


def doc_commands(doc: Path, heading: str) -> list[str]:
    """The command lines of the first ```sh block under the heading that matches `heading`."""
    text = doc.read_text()
    found = re.search(rf"^{heading}\n(.*?)^```sh\n(.*?)^```", text, re.M | re.S)
    assert found, f"{doc.name} has no ```sh block under {heading!r}"
    return [line for line in found.group(2).splitlines() if line.strip()]


def run_as_written(project: Path, env: dict[str, str], commands: list[str], edit: Callable[[Path], None]) -> None:
    for command in commands:
        argv = shlex.split(command, comments=True)
        if argv[0] in ("$EDITOR", "${EDITOR:-vi}"):
            edit(project / argv[1])
            continue
        if argv[:3] == ["python", "-m", "release"]:
            result = run_release(project, *argv[3:], env=env)
        elif argv[0] == "git":
            result = git(project, env, *argv[1:], check=False)
        else:
            raise AssertionError(f"a documented step this test cannot run: {command}")
        assert result.returncode == 0, (command, result.stdout, result.stderr)


def commits(project: Path) -> list[tuple[str, ...]]:
    """Each patch commit of the work tree: author, author date, message, tree (what a round trip must keep)."""
    out = subprocess.run(
        ["git", "-C", str(project / ".work/pq"), "log", "--reverse", "--format=%an <%ae>%x00%ad%x00%B%x00%T%x01",
         "pristine..HEAD"], capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [tuple(entry.strip("\n").split("\0")) for entry in out.split("\x01") if entry.strip()]


def head(project: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(project / ".work/pq"), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


# ------------------------------------------------------------- byte for byte


def test_an_unchanged_queue_exports_byte_for_byte(project: Path) -> None:
    """The CI check: import the real queue, export it, and patches/ and vendor/ are the same bytes."""
    before = snapshot(project)
    imported = run_release(project, "pq", "import")
    assert imported.returncode == 0, imported.stderr
    tree = project / ".work" / "pq"
    pin = Pin.load(project / "vendor/vllm_fused_moe/UPSTREAM.toml")
    pristine = files_at(tree, "pristine", UPSTREAM_SUBTREE)
    assert {name: sha256_hex(data) for name, data in pristine.items()} == pin.files  # commit 1: the pinned tag
    series = Series.load(project / "patches" / "series").names
    mails = [Patch.load(project / "patches" / name) for name in series]
    assert [c[0] for c in commits(project)] == [p.author for p in mails]  # one commit per patch, by its author
    assert all(f"\nPatch-Name: {p.name}" in c[2] for p, c in zip(mails, commits(project), strict=True))

    checked = run_release(project, "pq", "export", "--check")
    assert checked.returncode == 0, checked.stderr
    exported = run_release(project, "pq", "export", "--json")
    assert exported.returncode == 0, exported.stderr
    result = json.loads(exported.stdout)
    assert [(p["name"], p["status"]) for p in result["patches"]] == [(name, "unchanged") for name in series]
    assert result["changed"] == [] and result["written"] is False
    assert snapshot(project) == before

    first = head(project)
    again = run_release(project, "pq", "import")  # everything was exported: replaced without --force
    assert again.returncode == 0, again.stderr
    assert head(project) == first  # an unchanged queue gives the very same commits


def test_a_patch_made_with_other_flags_fails_the_check_until_exported(project: Path) -> None:
    path = project / "patches" / FIX
    text = path.read_text()
    # What `git format-patch` without --full-index writes: abbreviated blob ids. git applies it all the same.
    short = re.sub(r"^index ([0-9a-f]{7})[0-9a-f]+\.\.([0-9a-f]{7})[0-9a-f]+ ", r"index \1..\2 ", text, flags=re.M)
    assert short != text
    path.write_text(short)
    assert run_release(project, "check").returncode == 0
    assert run_release(project, "pq", "import").returncode == 0
    before = snapshot(project)
    checked = run_release(project, "pq", "export", "--check")
    assert checked.returncode == 1
    tree = project / ".work" / "pq"
    error = failed(checked)
    assert error.reference == PatchQueueStaleError.reference, checked.stderr
    assert error.message == f"pq export --check: 1 path(s) differ from what {tree} exports: patches/{FIX}"
    assert snapshot(project) == before
    exported = run_release(project, "pq", "export")
    assert exported.returncode == 0, exported.stderr
    assert f"{FIX}  changed" in exported.stdout and "vendor/" not in exported.stdout.split("wrote", 1)[1]
    assert path.read_text() == text  # the full index again: what the tool writes
    assert run_release(project, "pq", "export", "--check").returncode == 0


# -------------------------------------------------------------- as documented


# The documented patch's name is the doc's example; the test adds one of a name nobody chose, as a maintainer would.
MADE_UP_SLUG = "quokka-guard"


def rule_tests(project: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The unit tier's rule tests (marker `rules`: they hold the checkout's own queue to the tool's rules) on
    `project`, in one process: what `nox -s unit` would say of that queue, without the rest of the tier. Only
    the files that mark one are collected (collecting the whole tier took most of half a minute)."""
    files = [
        str(path.relative_to(REPO))
        for tier in ("unit", "hygiene")
        for path in sorted((REPO / "tests" / tier).glob("test_*.py"))
        if "@pytest.mark.rules" in path.read_text(encoding="utf-8")
    ]
    assert files, "no rule test in tests/unit or tests/hygiene"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "rules", *files, "-q", "-p", "no:randomly",
         "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "rules")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "VLLM_FUSED_MOE_RULES_CHECKOUT": str(project)},
    )  # fmt: skip


@pytest.mark.network  # train add --all reads every train tag's release wheel (from the cache when there)
def test_add_reorder_and_drop_a_patch_as_the_docs_say(project: Path, tmp_path: Path) -> None:
    original, train_before = snapshot(project), (project / "patches" / "train.toml").read_text()
    series_before = Series.load(project / "patches" / "series").names
    add = doc_commands(REPO / "docs" / "patch-queue.md", "## Add a patch")
    assert add == doc_commands(REPO / "docs" / "maintainers.md", r"## \d+\. Add or change a patch")
    # The doc's block as it stands, with the name the tool gives a new slug (`pq new` takes the next free number).
    new = f"{next_number(used_names(Layout(project))):04d}-{MADE_UP_SLUG}.patch"
    assert any(NEW in command for command in add) and any("pq new shape-check" in command for command in add)
    add = [c.replace(NEW, new).replace("pq new shape-check", f"pq new {MADE_UP_SLUG}") for c in add]
    run_as_written(project, maintainer(tmp_path), add, shape_check)  # ends with check, train add --all, train check

    series = Series.load(project / "patches" / "series").names
    assert series == [*series_before, new]
    patch = Patch.load(project / "patches" / new)
    assert patch.subject == ANSWERS["subject"] and patch.purpose.downstream
    assert patch.sections["Why"] == ANSWERS["Why"] and patch.trailers["Risk"] == ANSWERS["Risk"]
    assert "Patch-Name" not in patch.text and patch.author == "A Maintainer <maintainer@example.com>"
    assert SHAPE_CHECK in (project / VENDOR_TWO_SIDED).read_text()
    assert all((project / "patches" / name).read_bytes() == original[f"patches/{name}"] for name in series_before)
    # pq carry wrote a variant where the line has the class, pq skip answered for the rest: no line is silent.
    layout = Layout(project)
    report = json.loads((project / "reports/pq-carry/carry-report.json").read_text())  # `pq carry --all`: per patch
    carried = next(r for r in report["reports"] if r["patch"] == new)
    assert report["reports"][-1]["head"]["result"] == "replays"
    older = [line for line in read_lines(layout.lines).lines if not is_head(layout, line)]
    assert {c["line"] for c in carried["lines"]} == {line.name for line in older}
    written = [c["line"] for c in carried["lines"] if c["result"] == "written"]
    assert written and carried["silent"] == [c["line"] for c in carried["lines"] if c["result"] == "needs-variant"]
    for line in older:
        said = account(line_entries(layout, line))[new]
        if line.name in written:
            variant = Patch.load(line.patch_dir(project) / said.name, line.prefixes)
            assert variant.varies == new and "Carried-From: " + new in variant.text and SHAPE_CHECK in variant.text
        else:
            assert said.kind == EntryKind.SKIP and line.name in carried["silent"]
    entries = load_train(layout).entries
    assert all(
        any(n.startswith(new[:5]) for n in e.patches) for e in entries if e.line in [*written, "prepare_finalize"]
    )
    train = (project / "patches" / "train.toml").read_text()
    assert train != train_before  # re-recorded: the head line's patched hashes moved
    # Then the edit loop's rule tests hold the new queue to the tool's rules (docs/patch-queue.md's promise).
    rules = rule_tests(project, tmp_path)
    assert rules.returncode == 0 and " passed" in rules.stdout, rules.stdout[-3000:] + rules.stderr[-2000:]
    two_patches = snapshot(project)

    # The round trip: import again gives the same commits (author, date, message, tree) and exports the same bytes.
    made = commits(project)
    assert run_release(project, "pq", "import").returncode == 0
    assert commits(project) == made
    assert run_release(project, "pq", "export", "--check").returncode == 0

    change = doc_commands(REPO / "docs" / "patch-queue.md", "### Change, reorder or drop a patch")
    run_as_written(project, maintainer(tmp_path, "last-first"), change, shape_check)
    assert Series.load(project / "patches" / "series").names == [new, *series_before]
    vendor = "vendor/vllm_fused_moe/prepare_finalize/"
    assert {k: v for k, v in snapshot(project).items() if k.startswith(vendor)} == {
        k: v for k, v in two_patches.items() if k.startswith(vendor)
    }  # the two commute: the same tree, in another order

    run_as_written(project, maintainer(tmp_path, "first-last"), change, shape_check)  # back again
    assert snapshot(project) == two_patches
    run_as_written(project, maintainer(tmp_path, "drop"), change, shape_check)
    after = snapshot(project)
    after["patches/train.toml"] = original["patches/train.toml"]  # re-recording is the next step, not the export's
    assert after == original  # dropping the patch gives back every byte it changed


# ------------------------------------------------------------------ refusals


def new_commit(project: Path, env: dict[str, str], template: bool = True, message: str = "") -> None:
    """pq new, the shape check, `git commit -a -t` (or -m MESSAGE): a patch commit as the docs make it."""
    if template:
        assert run_release(project, "pq", "new", "shape-check", env=env).returncode == 0
    shape_check(project / ".work/pq" / TWO_SIDED)
    args = ["-t", ".git/pq-template"] if template else ["-m", message]
    git(project, env, "-C", ".work/pq", "commit", "-q", "-a", *args)


REFUSALS = [
    ("uncommitted", r"\.work/pq has 1 uncommitted or untracked file\(s\): " + re.escape(TWO_SIDED)),
    ("untracked", r"has 1 uncommitted or untracked file\(s\): notes\.txt"),
    ("no answers", rf"commit [0-9a-f]{{12}}: {NEXT}-fused-moe-quick-fix\.patch: message not in the template's shape: "
                   r"no Why:; no How:; no Related PR:; no Future plan:; no Origin: trailer"),
    ("empty", r"commit [0-9a-f]{12} \(nothing\) changes nothing: a patch is never empty"),
    ("one name twice", rf"commits [0-9a-f]{{12}} and [0-9a-f]{{12}} both say Patch-Name: {NEXT}-shape-check\.patch"),
    ("merge", r"holds merge commit\(s\) [0-9a-f]{12}"),
    ("rebase half-done", r"a `git rebase` or `git am` is in progress in"),
]  # fmt: skip


@pytest.mark.parametrize("case, said", REFUSALS, ids=[case for case, _ in REFUSALS])
def test_export_refuses_what_is_no_series_of_patches_and_changes_nothing(
    project: Path, tmp_path: Path, case: str, said: str
) -> None:
    env = maintainer(tmp_path)
    assert run_release(project, "pq", "import").returncode == 0
    tree = project / ".work" / "pq"
    if case == "uncommitted":
        shape_check(tree / TWO_SIDED)
    elif case == "untracked":
        (tree / "notes.txt").write_text("to do\n")
    elif case == "no answers":
        new_commit(project, env, template=False, message="fused_moe: quick fix")
    elif case == "empty":
        git(project, env, "-C", ".work/pq", "commit", "-q", "--allow-empty", "-m", "nothing")
    elif case == "one name twice":
        new_commit(project, env)
        (tree / UPSTREAM_SUBTREE / "our_note.py").write_text("NOTE = 1\n")
        git(project, env, "-C", ".work/pq", "add", "--all")
        git(project, env, "-C", ".work/pq", "commit", "-q", "-t", ".git/pq-template")  # the same template again
    elif case == "merge":
        git(project, env, "-C", ".work/pq", "switch", "-q", "-c", "side", "pristine")
        new_commit(project, env)
        git(project, env, "-C", ".work/pq", "switch", "-q", "patch-queue")
        git(project, env, "-C", ".work/pq", "merge", "-q", "--no-ff", "--no-edit", "side")
    else:  # a `git am` that stopped: the mail does not apply
        (tmp_path / "bad.patch").write_text((project / "patches" / FIX).read_text())
        git(project, env, "-C", ".work/pq", "am", str(tmp_path / "bad.patch"), check=False)
    before, tree_state = snapshot(project), commits(project)
    exported = run_release(project, "pq", "export")
    assert exported.returncode == 2, exported.stdout + exported.stderr
    error = failed(exported)
    # A commit that is no patch is the work tree's fault; one whose message lacks the answers, the patch's.
    kind = MalformedPatchError if case == "no answers" else PatchQueueTreeError
    assert error.reference == kind.reference and re.search(said, error.message), error
    assert exported.stderr.splitlines()[1].startswith("hint: ")
    if case == "no answers":
        assert "python -m release pq new SLUG" in error.hint
    assert snapshot(project) == before and commits(project) == tree_state


def test_import_keeps_work_that_was_never_exported(project: Path, tmp_path: Path) -> None:
    env = maintainer(tmp_path)
    assert run_release(project, "pq", "import").returncode == 0
    new_commit(project, env)
    made = head(project)
    again = run_release(project, "pq", "import")
    assert again.returncode == 2
    assert "holds work that was never exported: HEAD is not what patches/ was last exported from (1 commit(s)" in (
        again.stderr
    )
    assert "--force" in again.stderr and head(project) == made
    forced = run_release(project, "pq", "import", "--force")
    assert forced.returncode == 0, forced.stderr
    assert head(project) != made and len(commits(project)) == 1

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine\n")
    for extra in ([], ["--force"]):
        refused = run_release(project, "pq", "import", "--dir", str(foreign), *extra)
        assert refused.returncode == 2 and "is not a patch-queue work tree; nothing was changed" in refused.stderr
    assert [p.name for p in foreign.iterdir()] == ["keep.txt"]


def test_export_refuses_to_drop_a_patch_a_line_takes_as_it_is(project: Path, tmp_path: Path) -> None:
    env = maintainer(tmp_path)
    assert run_release(project, "pq", "import").returncode == 0
    new_commit(project, env)
    assert run_release(project, "pq", "export").returncode == 0
    line_series = project / "patches/lines/flashinfer_nvlink/series"
    new = f"{NEXT}-shape-check.patch"
    line_series.write_text(line_series.read_text() + f"take {new}\n")  # the line takes the common patch as it is
    git(project, env, "-C", ".work/pq", "reset", "-q", "--hard", "HEAD~1")  # drop it with plain git
    before = snapshot(project)
    exported = run_release(project, "pq", "export")
    assert exported.returncode == 2
    error = failed(exported)
    assert error.reference == PatchQueueTreeError.reference, exported.stderr
    assert error.message.startswith(f"patches/lines/flashinfer_nvlink/series takes {new} as it is"), error
    assert snapshot(project) == before


def test_every_reader_of_the_queue_refuses_a_patch_without_the_answers(project: Path) -> None:
    path = project / "patches" / FIX
    path.write_text(re.sub(r"^Risk: .*\n", "", path.read_text(), count=1, flags=re.M))
    before = snapshot(project)
    for args in (["check"], ["status"], ["pq", "import"]):
        result = run_release(project, *args)
        assert result.returncode == 2, args
        error = failed(result)
        assert error.reference == MalformedPatchError.reference, (args, result.stderr)
        assert error.message.startswith(f"{FIX}: ") and "no Risk: trailer" in error.message, error
        assert "`python -m release pq new SLUG`" in error.hint
    assert snapshot(project) == before
