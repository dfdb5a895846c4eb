"""`upstream-pr PATCH`: the steps from one of our patches to the mail, PR.md and (with --vllm) a branch.

Every refusal comes before anything is written: the patch, --out, the patch applying to the pinned
tag, the regression test's proof; then the two files, then the branch.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from release.core import log
from release.core.errors import EXIT_OK, OutputNotWritableError
from release.core.journal import write_atomic
from release.core.layout import Layout, writable_dir_problem
from release.core.lock import repo_lock
from release.queue.regression import upstream_test
from release.queue.snapshot import Checkout
from release.upstream_pr import evidence as pr_evidence
from release.upstream_pr.branch import Clone, branch_name, make_branch, preflight
from release.upstream_pr.mail import upstream_mail, with_test
from release.upstream_pr.plan import check_applies_offline, check_proof, pristine_of_pin, proof_plan
from release.upstream_pr.prove import Outcome, prove
from release.upstream_pr.pull_request import PullRequest, RegressionTest, render, results_table
from release.upstream_pr.resolve import refuse_if_upstream, resolve


@dataclass(frozen=True)
class PrOptions:
    """What `upstream-pr` was asked (its options, one field each)."""

    patch: str  # a path, a file name in patches/, or a number
    python: str  # the interpreter the regression test runs under
    vllm: Path | None = None  # a clone of vLLM to make the branch in
    out: Path | None = None  # where the mail and PR.md go (default: reports/upstream-pr/<slug>/)
    reports: Path | None = None  # where the contract, kernel and GSM8K reports are (default: reports/)
    title_prefix: str | None = None
    skip_test_run: bool = False


def refuse_output(layout: Layout, out: Path) -> None:
    """--out is checked before any work: a directory that can be made and written, outside the queue.

    `/dev/null` or a read-only checkout would fail only after the proof ran; `--out patches` would
    overwrite patches/NNNN-….patch with the stripped mail."""
    problem = writable_dir_problem(out)
    if problem:
        raise OutputNotWritableError(f"--out {out}: {problem}; nothing was done")
    for kept in (layout.patches, layout.root / "vendor", layout.root / ".git"):
        if out == kept.resolve() or out.is_relative_to(kept.resolve()):
            raise OutputNotWritableError(
                f"--out {out} is inside {kept}: the mail would overwrite what the queue keeps; nothing was done",
                hint="name a directory outside patches/, vendor/ and .git (default: reports/upstream-pr/<slug>/)",
            )


def propose(layout: Layout, options: PrOptions) -> int:
    # A reader of the checkout (it writes only under --out and in the vLLM clone): a shared lock, as `check`
    # takes, so it finishes a swap a killed command left instead of reading it half done.
    with repo_lock(layout, "upstream-pr", shared=True):
        return _propose(layout, options)


def _propose(layout: Layout, options: PrOptions) -> int:
    checkout = Checkout.load(layout)  # the command's one read of the pin, the queue, the train (and the scan data)
    path = resolve(layout, options.patch)
    patch = checkout.patch(path)
    refuse_if_upstream(layout, path, patch)
    pin = checkout.queue.pin
    mail = upstream_mail(patch)
    test = upstream_test(layout, patch)
    if test is not None:
        mail = with_test(mail, *test)
    out = (options.out or layout.root / "reports" / "upstream-pr" / patch.slug).resolve()
    refuse_output(layout, out)

    branch = ""
    if options.vllm is not None:
        branch = branch_name(patch.slug)
        clone = Clone(options.vllm.resolve())
        with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-mail-") as tmp:
            staged = Path(tmp) / patch.name
            staged.write_text(mail.text, encoding="utf-8")
            preflight(clone, pin.tag, branch, staged)
    else:
        check_applies_offline(checkout, mail)

    regression = None
    if test is not None:
        outcomes: list[Outcome] = []
        if not options.skip_test_run:
            log.out(f"proving {test[0]} on vLLM's source (pytest under {options.python}) ...")
            outcomes = prove(proof_plan(checkout, patch), mail, *test, pristine_of_pin(checkout), options.python)
            for line in results_table(outcomes):
                log.out(line)
            check_proof(patch, outcomes)
        regression = RegressionTest(test[0], outcomes)

    reports = (options.reports or layout.root / "reports").resolve()
    evidence = pr_evidence.collect(reports, layout.root)
    pr = PullRequest(patch, mail, pin.tag, options.title_prefix, evidence, regression)
    out.mkdir(parents=True, exist_ok=True)
    mail_path, pr_path = out / patch.name, out / "PR.md"
    write_atomic(mail_path, mail.text.encode("utf-8"))
    write_atomic(pr_path, render(pr).encode("utf-8"))

    log.out(f"title: {pr.title}")
    log.out(f"patch: {mail_path}")
    log.out(f"body:  {pr_path}")
    if options.vllm is not None:
        commit = make_branch(clone, pin.tag, branch, mail_path)
        log.out(f"branch: {branch} at {commit[:12]} in {clone.path} (based on {pin.tag}, signed off)")
        log.out(
            "next: rebase onto vLLM main if needed, push to your fork, then "
            f"`gh pr create --repo vllm-project/vllm --head <you>:{branch} --title '{pr.title}' --body-file {pr_path}`"
        )
    else:
        log.out(
            f"next: in a vLLM clone at {pin.tag}: `git switch -c fused-moe/{patch.slug} {pin.tag} && "
            f"git am --signoff --keep-non-patch {mail_path}` (or rerun with --vllm PATH)"
        )
    if test is None:
        log.note(
            f"{patch.name} carries no regression test (PR.md says so): write one under patches/upstream-tests/ "
            "and name it in an `Upstream-Test: tests/...py` trailer (or in patches/upstream-tests/tests.toml)"
        )
    missing = [e.title for e in pr.evidence if not e.ran]
    if missing:
        log.note("not run yet (PR.md gives the commands): " + "; ".join(missing))
    return EXIT_OK
