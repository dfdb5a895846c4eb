"""`python -m release upstream-pr PATCH`: what a vLLM contributor submits, from one of our patches.

Steps, each refusing with exit 2 before anything is written:
  resolve   PATCH (path, file name in patches/, or number) -> the patch file
  refuse    retired or `Applied-Upstream:` patches (nothing left to send)
  mail      the upstream form of the mail (internal trailers out, diff untouched)
  check     it applies to the pinned tag: in the clone (--vllm), else to the pristine
            tree recovered offline from vendor/ by undoing the series
  write     OUT/<patch>.patch and OUT/PR.md; with --vllm also the branch fused-moe/<slug>
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from release.core import log
from release.core.errors import (
    EXIT_OK,
    AlreadyUpstreamError,
    DirtyVendorError,
    PatchDoesNotApplyError,
    UnknownPatchError,
)
from release.core.journal import write_atomic
from release.core.layout import Layout
from release.model.patch import Patch
from release.model.pin import Pin
from release.queue.drift import drift
from release.queue.load import Queue
from release.upstream_pr import evidence as pr_evidence
from release.upstream_pr.branch import Clone, branch_name, make_branch, preflight
from release.upstream_pr.mail import applies_to, upstream_mail
from release.upstream_pr.template import PullRequest, render

DESCRIPTION = """\
Turn a patch of patches/ into an upstream vLLM pull request.

Without --vllm: writes OUT/<patch>.patch (our mail in upstream paths, with our internal
DEP-3 trailers Origin, Risk, Depends-On, ... removed from the message; they go into PR.md)
and OUT/PR.md (vLLM's template: Purpose, Test Plan, Test Result). The patch is first checked
to apply to the pinned tag's pristine tree, recovered offline from vendor/.

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
        help="where the .patch and PR.md go (default: reports/upstream-pr/<slug>/)",
    )
    parser.add_argument(
        "--reports",
        type=Path,
        default=None,
        metavar="DIR",
        help="where to look for contract, kernel and GSM8K reports (default: reports/)",
    )
    parser.add_argument(
        "--title-prefix", default="[Bugfix]", help="vLLM title category when the subject has none (default: [Bugfix])"
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
    if re.fullmatch(r"\d{1,4}", spec):
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
    since = patch.trailers.get("Applied-Upstream", "").strip()
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


# ------------------------------------------------------------------------- run


def run(args: argparse.Namespace, layout: Layout) -> int:
    path = resolve(layout, args.patch)
    patch = Patch.load(path)
    refuse_if_upstream(layout, path, patch)
    pin = Pin.load(layout.upstream_toml)
    mail = upstream_mail(patch)
    out = (args.out or layout.root / "reports" / "upstream-pr" / patch.slug).resolve()

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

    reports = (args.reports or layout.root / "reports").resolve()
    pr = PullRequest(patch, mail, pin.tag, args.title_prefix, pr_evidence.collect(reports, layout.root))
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
    missing = [e.title for e in pr.evidence if not e.ran]
    if missing:
        log.note("not run yet (PR.md gives the commands): " + "; ".join(missing))
    return EXIT_OK
