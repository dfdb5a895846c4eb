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
import sys

from release.core import flags
from release.core.layout import Layout
from release.upstream_pr.propose import PrOptions, propose

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
    parser.add_argument(
        "patch", type=flags.name, metavar="PATCH", help="a path, a file name in patches/, or a number such as 0001"
    )
    parser.add_argument(
        "--vllm", type=flags.path, default=None, metavar="PATH", help="a clone of vLLM to create the branch in"
    )
    parser.add_argument(
        "--out",
        type=flags.path,
        default=None,
        metavar="DIR",
        help="where the .patch and PR.md go (default: reports/upstream-pr/<slug>/); checked before any work: "
        "a directory that can be written, outside patches/, vendor/ and .git (else exit 2)",
    )
    parser.add_argument(
        "--reports",
        type=flags.path,
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
        type=flags.name,
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


def run(args: argparse.Namespace, layout: Layout) -> int:
    return propose(
        layout,
        PrOptions(
            patch=args.patch,
            python=args.python,
            vllm=args.vllm,
            out=args.out,
            reports=args.reports,
            title_prefix=args.title_prefix,
            skip_test_run=args.skip_test_run,
        ),
    )
