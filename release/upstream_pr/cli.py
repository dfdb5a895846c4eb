"""`python -m release upstream-pr PATCH`: what a vLLM contributor submits, from one of our patches.

Steps, each refusing with exit 2 before anything is written:
  resolve   PATCH (path, file name in patches/, or number) -> the patch file
  refuse    retired or `Applied-Upstream:` patches (nothing left to send)
  mail      the upstream form of the mail (internal trailers out, diff untouched)
  test      the regression test its `Upstream-Test:` (or patches/upstream-tests/tests.toml) names,
            added to the mail; none is said loudly in PR.md
  check     it applies to the pinned tag: in the clone (--vllm), else to the pristine
            tree recovered offline from vendor/ by undoing the series
  prove     the test fails on the pinned tag (and on the newest train tag carrying the patch)
            and passes with the patch on each, and on the first release upstream fixed it in
            (exit 1 if any run shows otherwise, nothing written)
  write     OUT/<patch>.patch and OUT/PR.md; with --vllm also the branch fused-moe/<slug>
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from release.core import log
from release.core.errors import (
    EXIT_OK,
    AlreadyUpstreamError,
    DirtyVendorError,
    OutputNotWritableError,
    PatchDoesNotApplyError,
    UnknownPatchError,
    UnprovenUpstreamTestError,
)
from release.core.journal import write_atomic
from release.core.layout import Layout, writable_dir_problem
from release.model.patch import APPLIED_UPSTREAM, Patch
from release.model.pin import Pin
from release.model.train import Train
from release.queue.bugs import scan_data
from release.queue.drift import drift
from release.queue.load import Queue
from release.queue.regression import upstream_test
from release.upstream_pr import evidence as pr_evidence
from release.upstream_pr.branch import Clone, branch_name, make_branch, preflight
from release.upstream_pr.mail import applies_to, upstream_mail, with_test
from release.upstream_pr.prove import EXPECT_FAIL, EXPECT_PASS, Outcome, Run, prove
from release.upstream_pr.pull_request import PullRequest, RegressionTest, render, results_table

DESCRIPTION = """\
Turn a patch of patches/ into an upstream vLLM pull request.

Without --vllm: writes OUT/<patch>.patch (our mail in upstream paths, with our internal
DEP-3 trailers Origin, Risk, Depends-On, ... removed from the message; they go into PR.md)
and OUT/PR.md (vLLM's template: Purpose, Test Plan, Test Result). The patch is first checked
to apply to the pinned tag's pristine tree, recovered offline from vendor/.

The regression test: the patch's `Upstream-Test: tests/...py` trailer names the test's path in
vLLM's checkout (for a patch already released, whose text ships in its wheels, the entry of
patches/upstream-tests/tests.toml does); its content is patches/upstream-tests/<that path>. It is added to the mail (so
the branch carries it) and proven first: pytest runs it (under --python) against vLLM's real
source of each release, from the release wheel: it must fail on the pinned tag and on the newest
train tag carrying the patch, pass on both with the patch, and pass on the first release the scan
data (affected-releases.json) says has the change upstream. Every run is quoted in PR.md. A patch
naming no test is sent without one, and PR.md says so in a warning at its top.

With --vllm PATH (a clean clone of vLLM holding the pinned tag): also creates the branch
fused-moe/<slug> at that tag with the patch as one commit, author and message from the
patch, signed off by the clone's git identity (git am --signoff). An existing branch of
that name is never overwritten: delete it to regenerate.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.add_argument("patch", metavar="PATCH", help="a path, a file name in patches/, or a number such as 0001")
    parser.add_argument(
        "--vllm", type=Path, default=None, metavar="PATH", help="a clone of vLLM to create the branch in"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the .patch and PR.md go (default: reports/upstream-pr/<slug>/); checked before any work: "
        "a directory that can be written, outside patches/, vendor/ and .git (else exit 2)",
    )
    parser.add_argument(
        "--reports",
        type=Path,
        default=None,
        metavar="DIR",
        help="where to look for contract, kernel and GSM8K reports (default: reports/)",
    )
    parser.add_argument(
        "--title-prefix",
        default=None,
        help="vLLM title category when the subject has none (default: [Bugfix] for a patch with Bug:, "
        "[Misc] for a Downstream: change)",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        metavar="PATH",
        help="the interpreter the regression test runs under: pytest, torch and what vLLM imports "
        "(default: this one; `nox -s upstream_pr` makes such a venv)",
    )
    parser.add_argument(
        "--skip-test-run",
        action="store_true",
        help="add the regression test without running it; PR.md then says in a warning that it was not run",
    )


# ------------------------------------------------------------------ the steps


def resolve(layout: Layout, spec: str) -> Path:
    """The patch file PATCH names; retired patches are found too, so they can be refused by name."""
    given = Path(spec)
    if given.is_file():
        return given
    for directory in (layout.patches, layout.retired):
        if (directory / spec).is_file():
            return directory / spec
    if re.fullmatch(r"\d{1,4}", spec, re.ASCII):
        prefix = spec.zfill(4) + "-"
        matches = sorted(p for d in (layout.patches, layout.retired) if d.is_dir() for p in d.glob(f"{prefix}*.patch"))
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UnknownPatchError(
                f"{spec} names {len(matches)} patches: " + ", ".join(p.name for p in matches),
                hint="give the full file name",
            )
    raise UnknownPatchError(f"no patch {spec!r} in {layout.patches} or {layout.retired}")


def refuse_if_upstream(layout: Layout, path: Path, patch: Patch) -> None:
    since = patch.trailers.get(APPLIED_UPSTREAM, "").strip()
    if since:
        raise AlreadyUpstreamError(f"{patch.name} is already upstream since vLLM {since} (Applied-Upstream)")
    if path.resolve().parent == layout.retired.resolve():
        raise AlreadyUpstreamError(f"{patch.name} is retired to patches/retired/: already upstream")


def pristine_of_pin(layout: Layout) -> dict[str, bytes]:
    """The pinned tag's subtree, recovered offline: vendor/ with the whole series undone."""
    found, pristine = drift(layout, Queue.load(layout))
    if found:
        raise DirtyVendorError(
            f"vendor/ is not pristine + series ({len(found)} file(s), first: {found[0].line().strip()}), "
            "so the pinned tree cannot be recovered from it"
        )
    return pristine


def check_applies_offline(layout: Layout, pin: Pin, mail: Patch) -> None:
    ok, reason = applies_to(pristine_of_pin(layout), mail)
    if not ok:
        detail = reason.splitlines()[0] if reason else "git apply --check failed"
        raise PatchDoesNotApplyError(f"{mail.name} does not apply to the pristine {pin.tag} subtree: {detail}")


def proof_plan(layout: Layout, pin: Pin, patch: Patch) -> list[Run]:
    """Which releases the test runs on, and what each must show."""
    runs = [
        Run(pin.tag, False, EXPECT_FAIL, "the PR's base"),
        Run(pin.tag, True, EXPECT_PASS, "the PR's base"),
    ]
    carrying = [entry.tag for entry in Train.load(layout.train).entries if patch.name in entry.patches]
    if carrying and carrying[-1] != pin.tag:
        newest = carrying[-1]
        runs += [
            Run(newest, False, EXPECT_FAIL, "the newest release the train carries this patch on"),
            Run(newest, True, EXPECT_PASS, "the newest release the train carries this patch on"),
        ]
    data = scan_data(layout) or {}
    first = ((data.get("patches") or {}).get(patch.name) or {}).get("first_upstream")
    if isinstance(first, str) and first:
        why = "the first release with the change upstream, per the scan data"
        runs.append(Run(f"v{first}", False, EXPECT_PASS, why))
    return runs


def check_proof(patch: Patch, outcomes: list[Outcome]) -> None:
    wrong = [o for o in outcomes if not o.as_expected]
    if wrong:
        listing = "; ".join(
            f"vLLM {o.run.tag}{' with the patch' if o.run.patched else ''}: {o.result} ({o.summary}"
            + (f": {o.detail}" if o.detail else "")
            + f"), must {o.run.expect}"
            for o in wrong
        )
        raise UnprovenUpstreamTestError(f"{patch.name}: the regression test is not proven: {listing}")


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


# ------------------------------------------------------------------------- run


def run(args: argparse.Namespace, layout: Layout) -> int:
    path = resolve(layout, args.patch)
    patch = Patch.load(path)
    refuse_if_upstream(layout, path, patch)
    pin = Pin.load(layout.upstream_toml)
    mail = upstream_mail(patch)
    test = upstream_test(layout, patch)
    if test is not None:
        mail = with_test(mail, *test)
    out = (args.out or layout.root / "reports" / "upstream-pr" / patch.slug).resolve()
    refuse_output(layout, out)

    branch = ""
    if args.vllm is not None:
        branch = branch_name(patch.slug)
        clone = Clone(args.vllm.resolve())
        with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-mail-") as tmp:
            staged = Path(tmp) / patch.name
            staged.write_text(mail.text, encoding="utf-8")
            preflight(clone, pin.tag, branch, staged)
    else:
        check_applies_offline(layout, pin, mail)

    regression = None
    if test is not None:
        outcomes: list[Outcome] = []
        if not args.skip_test_run:
            log.out(f"proving {test[0]} on vLLM's source (pytest under {args.python}) ...")
            outcomes = prove(proof_plan(layout, pin, patch), mail, *test, pristine_of_pin(layout), args.python)
            for line in results_table(outcomes):
                log.out(line)
            check_proof(patch, outcomes)
        regression = RegressionTest(test[0], outcomes)

    reports = (args.reports or layout.root / "reports").resolve()
    evidence = pr_evidence.collect(reports, layout.root)
    pr = PullRequest(patch, mail, pin.tag, args.title_prefix, evidence, regression)
    out.mkdir(parents=True, exist_ok=True)
    mail_path, pr_path = out / patch.name, out / "PR.md"
    write_atomic(mail_path, mail.text.encode("utf-8"))
    write_atomic(pr_path, render(pr).encode("utf-8"))

    log.out(f"title: {pr.title}")
    log.out(f"patch: {mail_path}")
    log.out(f"body:  {pr_path}")
    if args.vllm is not None:
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
