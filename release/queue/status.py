"""`check` and `status`: is vendor/ what the pin and the series say, and what do we carry."""

from __future__ import annotations

from collections.abc import Collection

from release.core.files import present
from release.model.patch import APPLIED_UPSTREAM
from release.queue.bugs import missing_fixes, refuse_missing_fixes
from release.queue.drift import Drift
from release.queue.gates import refuse_stale, stale_variants
from release.queue.load import require_accounted
from release.queue.regression import refuse_untested
from release.queue.skip_proof import refuse_unproven_skips
from release.queue.snapshot import Checkout


def check(checkout: Checkout, tags: Collection[str] | None = None) -> list[Drift]:
    """How vendor/ differs from pristine + series. First refused (exit 2): a release line silent about a
    common patch, a line's variant carried from another version of its common patch (stale), and a train
    tag whose line's series carries no fix for a bug the tag has (patches/train.toml's record, the scan data),
    or skips a bug's patch with no proof that the tag does without the bug (release/queue/skip_proof.py).
    `checkout`: the checkout as the command read it under its lock. `tags`: the train tags held to the per-tag
    gates (None: every one; `publish` names the tags of its wheels)."""
    require_accounted(checkout)
    refuse_untested(checkout.layout, checkout.queue.patches, "check")
    refuse_stale("check", stale_variants(checkout))
    refuse_train_missing_fixes(checkout, tags)
    return checkout.drift()[0]


def refuse_train_missing_fixes(checkout: Checkout, tags: Collection[str] | None = None) -> None:
    """Every train tag's series (of `tags`, when given), as its line's series stands, carries a fix for every bug
    the tag has."""
    layout = checkout.layout
    if not present(layout.train):
        return
    for entry in checkout.require_train().entries:
        if tags is not None and entry.tag not in tags:
            continue
        patches = checkout.tag_patches(checkout.line(entry.line), entry.tag)
        missing = missing_fixes(checkout, entry.tag, patches, list(entry.bugs))
        refuse_missing_fixes("check", entry.tag, missing, [p.name for p in patches], entry.line)
        # A line that skips a bug's patch claims its release has no such bug: proven by the bug's test passing there.
        refuse_unproven_skips(checkout, "check", entry.tag, entry.line, entry.wheel_sha256)


def status_lines(checkout: Checkout) -> list[str]:
    layout, queue = checkout.layout, checkout.queue
    pin = queue.pin
    where = (
        (pin.wheel and f"wheel {pin.wheel} (sha256 {pin.wheel_sha256[:12]}…)")
        or (pin.commit and f"commit {pin.commit[:12]}")
        or ""
    )
    lines = [
        f"pinned: vLLM {pin.tag} from {pin.source}" + (f", {where}" if where else ""),
        f"upstream FlashInfer pin: {pin.flashinfer or 'unknown'}",
        f"patches in series ({len(queue.patches)}):",
    ]
    found = {d.path for d in checkout.drift()[0]}
    for patch in queue.patches:
        touched = [p.rsplit("/", 1)[-1] for p in patch.files]
        state = "drifted" if any(t in found for t in touched) else "applied"
        lines.append(f"  {patch.name}: {state}; {patch.subject}")
        origin = patch.trailers.get("Origin")
        if origin:
            lines.append(f"      Origin: {origin}")
    retired = sorted(layout.retired.glob("*.patch")) if layout.retired.is_dir() else []
    lines.append(f"retired patches ({len(retired)}):")
    for path in retired:
        patch = checkout.patch(path)
        lines.append(f"  {patch.name}: upstream since {patch.trailers.get(APPLIED_UPSTREAM, '?')}; {patch.subject}")
    lines.append(
        "vendor/: " + ("clean" if not found else f"{len(found)} file(s) drifted, run `python -m release check`")
    )
    return lines
