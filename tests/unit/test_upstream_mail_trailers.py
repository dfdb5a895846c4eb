"""The upstream mail leaves out every trailer of our own bookkeeping (release/upstream_pr/mail.py)."""

from __future__ import annotations

from release.model import patch
from release.upstream_pr.mail import INTERNAL_TRAILERS


def test_every_trailer_the_patch_model_names_stays_out_of_the_upstream_mail() -> None:
    # Each trailer our tooling reads or writes is a constant of release/model/patch.py (one owner): a new
    # one (a line variant's Carried-From: was missed once) must not reach vLLM's history.
    named = {
        value
        for name, value in vars(patch).items()
        if name.isupper() and isinstance(value, str) and patch.TRAILER_RE.match(f"{value}: x")
    }
    named |= {
        key for group in (patch.REQUIRED_TRAILERS, patch.PURPOSE_TRAILERS, patch.BACKPORT_TRAILERS) for key in group
    }
    assert {"Varies", "Carried-From", "Origin"} <= named  # the model's names were found at all
    assert named - INTERNAL_TRAILERS == set()
