"""What the pull request must show before it is written: the patch applies to the pinned tag, and its
regression test fails without it and passes with it on the releases `proof_plan` names."""

from __future__ import annotations

from release.core.errors import DirtyVendorError, PatchDoesNotApplyError, UnprovenUpstreamTestError
from release.model.patch import Patch
from release.queue.snapshot import Checkout
from release.upstream_pr.mail import applies_to
from release.upstream_pr.prove import EXPECT_FAIL, EXPECT_PASS, Outcome, Run


def pristine_of_pin(checkout: Checkout) -> dict[str, bytes]:
    """The pinned tag's subtree, recovered offline: vendor/ with the whole series undone (once per command)."""
    found, pristine = checkout.drift()
    if found:
        raise DirtyVendorError(
            f"vendor/ is not pristine + series ({len(found)} file(s), first: {found[0].line().strip()}), "
            "so the pinned tree cannot be recovered from it"
        )
    return pristine


def check_applies_offline(checkout: Checkout, mail: Patch) -> None:
    pin = checkout.queue.pin
    ok, reason = applies_to(pristine_of_pin(checkout), mail)
    if not ok:
        detail = reason.splitlines()[0] if reason else "git apply --check failed"
        raise PatchDoesNotApplyError(f"{mail.name} does not apply to the pristine {pin.tag} subtree: {detail}")


def proof_plan(checkout: Checkout, patch: Patch) -> list[Run]:
    """Which releases the test runs on, and what each must show: from the pin, the train and the scan data."""
    pin = checkout.queue.pin
    runs = [
        Run(pin.tag, False, EXPECT_FAIL, "the PR's base"),
        Run(pin.tag, True, EXPECT_PASS, "the PR's base"),
    ]
    carrying = [entry.tag for entry in checkout.require_train().entries if patch.name in entry.patches]
    if carrying and carrying[-1] != pin.tag:
        newest = carrying[-1]
        runs += [
            Run(newest, False, EXPECT_FAIL, "the newest release the train carries this patch on"),
            Run(newest, True, EXPECT_PASS, "the newest release the train carries this patch on"),
        ]
    data = checkout.scan or {}
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
