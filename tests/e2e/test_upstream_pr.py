"""`upstream-pr` on the queue's bug fix (helpers/fix.py) and a vLLM tree built from the real release files of the pin.

The vLLM "clone" is a git repository made in the test from the subtree of the real
release wheel of the tag vendor/ was built from (UPSTREAM.toml; cached from the package
index), committed at upstream paths and tagged with it, the way a clone of
github.com/vllm-project/vllm has it.

One run proves the fix's regression test (pytest against vLLM's real source of each release
the plan names, from their release wheels: five runs, about 10 s of CPU each); the others pass
--skip-test-run, or stop before the proof.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, run_release, snapshot, tag_facts
from helpers.failure import failed
from helpers.fix import fix_patch
from release.core.errors import (
    AlreadyUpstreamError,
    CloneError,
    DirtyCloneError,
    PatchDoesNotApplyError,
    UnknownPatchError,
    UnprovenUpstreamTestError,
)
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.gsm8k.results import RunResult, SmokeReport, write_report
from release.gsm8k.scoring import MetricResult
from release.model.patch import UPSTREAM_SUBTREE_PREFIX, Patch
from release.model.source import Source
from release.pristine.sources import fetch
from release.queue.regression import upstream_test
from release.upstream_pr.mail import INTERNAL_TRAILERS, upstream_mail

pytestmark = pytest.mark.network  # the pinned release's wheel comes from the package index once, then the cache

FIX = fix_patch().name  # the queue's first bug fix (helpers/fix.py), whatever its name
NUMBER = FIX[:4]  # the fix by its number, as a maintainer types it
BRANCH = f"fused-moe/{Patch(FIX, '').slug}"
AUTHOR = Patch.load(fix_patch()).author
CONTRIBUTOR = {"user.name": "A Contributor", "user.email": "contributor@example.com"}
HEAD = tag_facts.head()
UPSTREAM_TEST = (upstream_test(Layout(REPO), Patch.load(fix_patch())) or ("the fix names no test", ""))[0]


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args} failed: {proc.stderr}")
    return proc.stdout


@pytest.fixture(scope="module")
def pinned_files() -> dict[str, bytes]:
    return fetch(HEAD.tag, Source.parse("pypi")).files


@pytest.fixture
def vllm(tmp_path: Path, pinned_files: dict[str, bytes]) -> Path:
    """A vLLM clone at the pinned tag (the prepare_finalize subtree of the real release), clean, on main."""
    repo = tmp_path / "vllm"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    for key, value in CONTRIBUTOR.items():
        git(repo, "config", key, value)
    for name, data in pinned_files.items():
        target = repo / UPSTREAM_SUBTREE / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (repo / "README.md").write_text("vLLM\n")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", f"vLLM {HEAD.tag}")
    git(repo, "tag", "-a", HEAD.tag, "-m", HEAD.tag)
    # main moves on after the tag: the branch must start at the tag, not at main.
    (repo / "README.md").write_text("vLLM, later\n")
    git(repo, "commit", "--quiet", "-am", f"after {HEAD.tag}")
    return repo


def clone_state(repo: Path) -> tuple[str, str, str, str]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        git(repo, "status", "--porcelain"),
    )


def test_patch_and_pr_md_without_a_clone(project: Path, tmp_path: Path, vllm: Path) -> None:
    before = snapshot(project)
    out = tmp_path / "out"
    result = run_release(
        project, "upstream-pr", NUMBER, "--out", str(out), "--reports", str(tmp_path / "none"), "--skip-test-run"
    )
    assert result.returncode == 0, result.stderr
    assert snapshot(project) == before

    mail = out / FIX
    # The file a contributor submits applies to the real pinned release as it is.
    check = subprocess.run(
        ["git", "-C", str(vllm), "apply", "--check", str(mail)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr
    ours, theirs = Patch.load(project / "patches" / FIX), Patch(mail.name, mail.read_text())
    # A well-formed mail that also adds the regression test; our trailers are gone, so it is no queue patch.
    theirs.validate_mail((UPSTREAM_SUBTREE_PREFIX, "tests/"))
    assert theirs.subject == ours.subject and theirs.author.startswith("Seed 129948c4 maintainers")
    assert theirs.diff.endswith(ours.diff) and theirs.files == [UPSTREAM_TEST, *ours.files]
    test_text = (project / "patches" / "upstream-tests" / UPSTREAM_TEST).read_text()
    assert [h.added for h in theirs.hunks if h.path == UPSTREAM_TEST] == [test_text.splitlines()]
    text = mail.read_text()
    for key in ("Origin", "Risk", "Depends-On", "Forwarded", "Last-Update", "Upstream-Test"):
        assert f"\n{key}: " not in text
    assert "GSM8K 5-shot fell from 0.92-0.93 to about 0.80" in text  # the prose stays

    pr = (out / "PR.md").read_text()
    sections = [line for line in pr.splitlines() if line.startswith("## ")]
    assert sections == ["## Purpose", "## Test Plan", "## Test Result"]
    assert "- Risk: relies on FlashInfer internals" in pr  # trailers moved into the PR body
    assert "- Origin: upstream, https://github.com/vllm-project/vllm/pull/41382" in pr
    # No report exists, so every result is "not run" with its command, and none is claimed.
    assert pr.count("Not run yet. Produce it with:") == 3
    assert "nox -s kernel" in pr and "--backend flashinfer_nvlink_one_sided --compare" in pr
    assert "- [ ] The test results" in pr
    assert "<!-- Title: [Bugfix] fused_moe: FlashInfer NVLink combine output is already reduced -->" in pr
    # Not run, and said so before anything else.
    assert pr.split("## Purpose")[0].count(f"**The regression test `{UPSTREAM_TEST}` was not run**") == 1
    assert f"`pytest {UPSTREAM_TEST}`" in pr


def newest_train_tag_carrying(name: str) -> str:
    return [entry.tag for entry in tag_facts.train().entries if name in entry.patches][-1]


def test_branch_in_a_vllm_clone(project: Path, tmp_path: Path, vllm: Path) -> None:
    # The proof runs pytest five times against real releases: longer than run_release's limit on a loaded machine.
    options = ["--vllm", str(vllm), "--out", str(tmp_path / "out"), "--reports", str(tmp_path / "none")]
    result = subprocess.run(
        [sys.executable, "-m", "release", "--root", str(project), "upstream-pr", FIX, *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # The regression test was proven on vLLM's real source, and PR.md shows each run.
    pr = (tmp_path / "out" / "PR.md").read_text()
    newest, fixed = newest_train_tag_carrying(FIX), tag_facts.first_fixed()

    def rows(tag: str) -> list[str]:
        return [line.split(") ", 1)[1] for line in pr.splitlines() if line.startswith(f"| `{tag}` (")]

    for tag in (HEAD.tag, newest):
        assert rows(tag)[:2] == [
            "| without | fail | failed, as expected | 2 failed: `assert False is True` |",
            "| with | pass | passed, as expected | 2 passed |",
        ]
    assert rows(fixed) == ["| without | pass | passed, as expected | 2 passed |"]
    assert "was not run" not in pr and "carries no regression test" not in pr
    assert git(vllm, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    assert git(vllm, "rev-parse", "HEAD^").strip() == git(vllm, "rev-parse", f"{HEAD.tag}^{{commit}}").strip()
    assert git(vllm, "log", "-1", "--format=%an <%ae>").strip() == AUTHOR
    message = git(vllm, "log", "-1", "--format=%B")
    assert message.startswith("fused_moe: FlashInfer NVLink combine output is already reduced\n")
    assert message.rstrip().endswith("Signed-off-by: A Contributor <contributor@example.com>")
    assert not any(f"\n{key}: " in message for key in INTERNAL_TRAILERS)
    changed = git(vllm, "diff", "--name-only", HEAD.tag, "HEAD").split()
    assert changed == [
        UPSTREAM_TEST,
        f"{UPSTREAM_SUBTREE}/flashinfer_nvlink_one_sided.py",
        f"{UPSTREAM_SUBTREE}/flashinfer_nvlink_two_sided.py",
    ]
    two_sided = (vllm / UPSTREAM_SUBTREE / "flashinfer_nvlink_two_sided.py").read_text()
    assert "reducing again over TP double counts.\n        return True" in two_sided
    assert git(vllm, "status", "--porcelain") == ""

    # Again: the branch exists, so it is refused and nothing moves.
    state = clone_state(vllm)
    again = run_release(project, "upstream-pr", NUMBER, "--vllm", str(vllm), "--out", str(tmp_path / "out2"))
    assert again.returncode == 2
    assert f"already has a branch {BRANCH}" in again.stderr
    assert clone_state(vllm) == state and not (tmp_path / "out2").exists()


def test_dirty_clone_is_refused_and_untouched(project: Path, tmp_path: Path, vllm: Path) -> None:
    (vllm / "README.md").write_text("local edit\n")
    state = clone_state(vllm)
    result = run_release(project, "upstream-pr", NUMBER, "--vllm", str(vllm), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert failed(result).reference == DirtyCloneError.reference, result.stderr
    assert clone_state(vllm) == state and not (tmp_path / "out").exists()


def test_clone_without_the_tag_is_refused(project: Path, tmp_path: Path, vllm: Path) -> None:
    git(vllm, "tag", "-d", HEAD.tag)
    result = run_release(project, "upstream-pr", NUMBER, "--vllm", str(vllm), "--out", str(tmp_path / "out"))
    error = failed(result)
    assert result.returncode == 2 and error.reference == CloneError.reference and HEAD.tag in error.message
    assert "fetch" in error.hint  # the hint says how to get it


@pytest.mark.parametrize("spec", ["0042", "no-such.patch", str(int(NUMBER))])
def test_unknown_or_ambiguous_patch_is_bad_input(project: Path, tmp_path: Path, spec: str) -> None:
    if spec == str(int(NUMBER)):  # two patches of the fix's number: ambiguous
        (project / "patches" / f"{NUMBER}-other.patch").write_text((project / "patches" / FIX).read_text())
    before = snapshot(project)
    result = run_release(project, "upstream-pr", spec, "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert failed(result).reference == UnknownPatchError.reference and result.stderr.startswith("error["), result.stderr
    assert snapshot(project) == before and not (tmp_path / "out").exists()


def test_retired_patch_is_refused_with_its_tag(project: Path, tmp_path: Path) -> None:
    patch = Patch.load(project / "patches" / FIX)
    (project / "patches" / FIX).unlink()
    (project / "patches" / "series").write_text("# empty\n")
    (project / "patches" / "retired").mkdir()
    (project / "patches" / "retired" / FIX).write_text(
        patch.with_trailer("Applied-Upstream", tag_facts.fixed_upstream()).text
    )
    before = snapshot(project)
    for spec in (NUMBER, FIX, str(project / "patches" / "retired" / FIX)):
        result = run_release(project, "upstream-pr", spec, "--out", str(tmp_path / "out"))
        assert result.returncode == 2, spec
        error = failed(result)
        assert error.reference == AlreadyUpstreamError.reference and tag_facts.fixed_upstream() in error.message, error
    assert snapshot(project) == before and not (tmp_path / "out").exists()


def test_patch_that_does_not_apply_to_the_tag_is_refused(project: Path, tmp_path: Path, vllm: Path) -> None:
    # Same change, but its context claims a line the pinned release does not have.
    text = (project / "patches" / FIX).read_text()
    broken = text.replace(" \n     def topk_indices_dtype(self)", " \n     def topk_indices_dtypes(self)", 1)
    assert broken != text
    (project / "patches" / "0002-broken.patch").write_text(broken)
    before = snapshot(project)
    offline = run_release(project, "upstream-pr", "0002", "--out", str(tmp_path / "out"))
    assert offline.returncode == 2
    error = failed(offline)
    assert error.reference == PatchDoesNotApplyError.reference and error.message.startswith("0002-broken.patch "), error
    state = clone_state(vllm)
    cloned = run_release(project, "upstream-pr", "0002", "--vllm", str(vllm), "--out", str(tmp_path / "out"))
    assert cloned.returncode == 2 and f"does not apply to {HEAD.tag} in {vllm}" in cloned.stderr
    assert clone_state(vllm) == state
    assert snapshot(project) == before and not (tmp_path / "out").exists()


def test_upstream_mail_keeps_standard_trailers() -> None:
    mail = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: A <a@example.com>\n"
        "Subject: [Bugfix] x\n\nWhy.\n\nOrigin: vendor\nCo-authored-by: B <b@example.com>\nRisk: low\n"
        " continued risk\nSigned-off-by: A <a@example.com>\n\n"
        f"diff --git a/{UPSTREAM_SUBTREE}/a.py b/{UPSTREAM_SUBTREE}/a.py\n--- a/{UPSTREAM_SUBTREE}/a.py\n"
        f"+++ b/{UPSTREAM_SUBTREE}/a.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    stripped = upstream_mail(Patch("0009-x.patch", mail))
    assert stripped.message == "Why.\n\nCo-authored-by: B <b@example.com>\nSigned-off-by: A <a@example.com>"
    assert stripped.diff == Patch("0009-x.patch", mail).diff


def test_pr_md_quotes_the_reports_that_exist(project: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    (reports / "contract").mkdir(parents=True)
    (reports / "contract" / "junit.xml").write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="12" failures="0" errors="0" '
        'skipped="2" timestamp="2026-12-01T10:00:00"/></testsuites>'
    )
    report = SmokeReport(
        "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
        "flashinfer_nvlink_two_sided",
        2,
        2,
        True,
        None,
        0.9,
        "strict-match",
        "2026-12-01T10:00:00+00:00",
    )
    for label, fixed, value in (("without-fix", False, 0.8012), ("with-fix", True, 0.9257)):
        metrics = {
            "strict-match": MetricResult(value, 0.0072, 1319),
            "flexible-extract": MetricResult(value + 0.001, 0.0071, 1319),
        }
        report.runs.append(
            RunResult(label, fixed, fixed, {"vllm": HEAD.version}, ["vllm", "serve"], "builtin", "local", metrics, {})
        )
    report.passed, report.verdict = True, "with-fix strict-match 0.9257 >= 0.90"
    write_report(report, reports / "gsm8k" / "20261201T100000Z-flashinfer_nvlink_two_sided")

    out, skip = tmp_path / "out", "--skip-test-run"
    result = run_release(project, "upstream-pr", NUMBER, "--out", str(out), "--reports", str(reports), skip)
    assert result.returncode == 0, result.stderr
    pr = (tmp_path / "out" / "PR.md").read_text()
    assert "10 passed, 0 failed, 0 errors, 2 skipped (pytest, 2026-12-01T10:00:00)" in pr
    assert "| `flashinfer_nvlink_two_sided` | with-fix | 0.9257 ± 0.0072 | 0.9267 ± 0.0071 | 1319 | PASS" in pr
    assert "| `flashinfer_nvlink_two_sided` | without-fix | 0.8012 ± 0.0072 |" in pr
    assert pr.count("Not run yet. Produce it with:") == 1  # only the kernel report is missing


def test_patch_without_a_test_says_so_loudly(project: Path, tmp_path: Path) -> None:
    path = project / "patches" / FIX
    assert not Patch.load(path).upstream_test  # the fix's test is named in tests.toml: that entry goes
    (project / "patches" / "upstream-tests" / "tests.toml").write_text("[tests]\n")
    result = run_release(project, "upstream-pr", NUMBER, "--out", str(tmp_path / "out"), "--reports", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "carries no regression test" in result.stderr
    pr = (tmp_path / "out" / "PR.md").read_text()
    assert pr.split("## Purpose")[0].count("**This PR carries no regression test.**") == 1
    assert "- [ ] The test results" in pr
    assert Patch(FIX, (tmp_path / "out" / FIX).read_text()).diff == Patch.load(path).diff


def test_a_test_that_passes_without_the_patch_is_refused(project: Path, tmp_path: Path) -> None:
    test = project / "patches" / "upstream-tests" / UPSTREAM_TEST
    # Calls the method, but asserts nothing about the answer: it passes before the fix too.
    test.write_text(test.read_text().replace("assert prepare_finalize.output_is_reduced() is True", "assert True"))
    before = snapshot(project)
    result = run_release(project, "upstream-pr", NUMBER, "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stderr
    error = failed(result)
    assert error.reference == UnprovenUpstreamTestError.reference, result.stderr
    # What each run did is the point: the one line says which run did not prove it.
    assert f"vLLM {HEAD.tag}: passed (2 passed), must fail" in error.message, error
    assert snapshot(project) == before and not (tmp_path / "out").exists()
