"""`build --all` and `build --tag`: one wheel per train tag, each proven against patches/train.toml.

The head's from vendor/, every other tag's from its pristine source + its line's series, reproduced in a
scratch directory and held to the hashes the train records (`train check`); every gate first."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from release.core import log
from release.core.errors import (
    BadInputError,
    ReleaseError,
    TagsNotBuiltError,
    TrainDriftError,
    UnverifiedFlashInferError,
)
from release.core.lock import repo_lock
from release.overlay.deliver import deliver
from release.overlay.dirt import checked_inputs, refuse_unwritable_or_missing
from release.overlay.levels import record_levels
from release.overlay.make import backend_for, build_target
from release.overlay.target import BuildPlan, BuildResult, BuildTarget, head_target
from release.queue.bugs import missing_fixes, refuse_missing_fixes
from release.queue.gates import refuse_stale, refuse_unrecorded, stale_variants
from release.queue.snapshot import Checkout
from release.queue.verified import unverified_reason, wheel_range


def build_train(plan: BuildPlan, tags: list[str] | None = None) -> list[BuildResult]:
    """One wheel per train tag (all, or the named ones), each proven against patches/train.toml.

    Named tags (`--tag`) are all or nothing: every tag's FlashInfer range and tree are settled, and
    every wheel is built in a scratch directory, before the first one is copied to `plan.out`.
    `--all` builds every tag it can and then raises TagsNotBuiltError naming each tag it could not
    build, with the reason: one tag's refusal does not keep the others' wheels from users.
    """
    with repo_lock(plan.layout, "build --all" if tags is None else "build --tag"):
        return _build_train(plan, tags)


def _build_train(plan: BuildPlan, tags: list[str] | None) -> list[BuildResult]:
    # Imported here, not at the top: train check reads releases (release.pristine pulls in requests,
    # ~0.4 s of start-up) and building the head's wheel alone never does.
    from release.train.check import check_train, select

    layout = plan.layout
    refuse_unwritable_or_missing(plan)
    checkout = Checkout.load(layout)  # under the lock: every stage below reads the checkout from it
    dirty = checked_inputs(plan, checkout)
    entries = select(checkout.require_train(), tags)
    chosen = [e.tag for e in entries]
    refused: dict[str, str] = {}  # tag -> why it is not built (--all only; named tags raise)
    lines = checkout.lines
    series = {e.tag: checkout.tag_patches(lines.get(e.line), e.tag) for e in entries}
    # A tag the scan data calls affected by a bug whose series carries no patch for it is refused before
    # anything is replayed: its wheel would tell users the fix is there.
    for e in entries:
        missing = missing_fixes(checkout, e.tag, series[e.tag], list(e.bugs))
        _settle(refused, e.tag, tags, refuse_missing_fixes, f"not building {e.tag}", e.tag, missing,
                [p.name for p in series[e.tag]], e.line)  # fmt: skip
    # A line's variant carried from another version of its common patch would ship the old change.
    for e in entries:
        stale = stale_variants(checkout, {f"patches/lines/{e.line}/{p.name}" for p in series[e.tag]})
        _settle(refused, e.tag, tags, refuse_stale, f"not building {e.tag}", stale)
    if plan.patch_level is not None and not dirty:
        for e in entries:  # a bad --patch-level is bad input for every tag: refused before anything is built
            e.refuse_level(plan.patch_level)
    entries = [e for e in entries if e.tag not in refused]
    log.note(f"build: reproducing {len(entries)} train tag(s) from their pristine sources (train check)")
    started = time.perf_counter()
    checks = check_train(checkout, [e.tag for e in entries]) if entries else []
    log.note(f"build: every tag reproduced its recorded hashes ({time.perf_counter() - started:.1f} s)")
    bad = [finding for c in checks for finding in c.findings]
    if bad and tags is not None:
        raise TrainDriftError(
            "the train does not reproduce, nothing was built: " + "; ".join(f.line() for f in bad[:5]),
            hint="`python -m release train check` lists every tag and file that differ",
        )
    for c in checks:
        if c.findings:
            refused[c.tag] = "it does not reproduce what patches/train.toml records: " + "; ".join(
                f.line() for f in c.findings[:3]
            )
    head = checkout.queue.pin.tag
    empty = [c.tag for c in checks if c.replay is not None and not c.replay.applied and c.tag not in refused]
    if empty and tags is not None:
        raise BadInputError(
            f"not building {', '.join(empty)}: its series carries nothing there (every patch upstream or skipped); "
            "an overlay would ship vLLM's own files"
        )
    note_no_wheel(empty)
    # The level of each wheel is the one patches/train.toml records for what its tag carries now (a dirty
    # build says in its version that it is not its commit, and publish refuses it).
    carried = {c.tag: [p for p in series[c.tag] if p.name in c.replay.applied] for c in checks if c.replay is not None}
    # VERIFIED.toml is the contract of the patches that rely on FlashInfer (Depends-On): a tag whose wheel carries
    # one (what its replay applies, not what its series names: 0001 is upstream from v0.22.0 on) needs a verified
    # version inside its pin; a tag whose wheel carries none asks nothing of FlashInfer.
    verified = checkout.verified
    shipped = {e.tag: carried.get(e.tag, series[e.tag]) for e in entries}
    ranges = {e.tag: wheel_range(verified, e.flashinfer, shipped[e.tag]) for e in entries}
    unverified = [e for e in entries if ranges[e.tag] is None and e.tag not in refused and e.tag not in empty]
    if unverified and tags is not None:
        raise UnverifiedFlashInferError(
            "; ".join(unverified_reason(e.tag, e.flashinfer, verified, shipped[e.tag]) for e in unverified)
            + "; nothing was built"
        )
    for e in unverified:
        refused[e.tag] = unverified_reason(e.tag, e.flashinfer, verified, shipped[e.tag])
    for entry in entries:
        if entry.tag not in empty and entry.tag in carried and not dirty:
            _settle(refused, entry.tag, tags, refuse_unrecorded, f"not building {entry.tag}", entry, carried[entry.tag])
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-build-") as scratch, backend_for(plan) as backend:
        for entry, checked in zip(entries, checks, strict=True):
            if entry.tag in empty or entry.tag in refused:
                continue
            flashinfer = str(ranges[entry.tag])
            if entry.tag == head:
                # vendor/ is the head; check_train just proved it holds exactly the recorded files.
                target = head_target(checkout, flashinfer, entry)
            else:
                assert checked.replay is not None  # a check without findings made the tree
                line = lines.get(entry.line)
                pin = entry.pin(line.root)
                # What the replay applied: a patch already upstream on this tag is not in its wheel.
                applied = tuple(p for p in series[entry.tag] if p.name in checked.replay.applied)
                series_text = checkout.series_text(line)
                target = BuildTarget(pin, flashinfer, line, applied, series_text, checked.replay.files, entry)
            results.append(build_target(plan, target, Path(scratch) / entry.tag, dirty, backend))
            built, total = results[-1], len(entries) - len(empty)
            log.note(f"build: {len(results)}/{total} vLLM {entry.tag}: {built.version} ({built.seconds:.1f} s)")
        delivered = [deliver(result, plan.out) for result in results]
        record_levels(plan, results, checkout.train)
    if refused:
        raise TagsNotBuiltError(
            f"{len(refused)} of {len(refused) + len(delivered) + len(empty)} train tags not built "
            f"({len(delivered)} wheels in {plan.out}): "
            + "; ".join(f"{t}: {refused[t]}" for t in chosen if t in refused),
            built=tuple(delivered),
        )
    return delivered


def note_no_wheel(tags: list[str]) -> None:
    """Say (a note: `-q` leaves it out) which train tags get no wheel because their series carries nothing."""
    for tag in tags:
        log.note(f"note: {tag} carries no patch (the head at a release that has every fix): no wheel")


def _settle(
    refused: dict[str, str], tag: str, named: list[str] | None, gate: Callable[..., None], *args: object
) -> None:
    """Run one gate for one tag: for named tags (`--tag`) its refusal stops the build; for `--all` it is
    recorded in `refused` (the first reason a tag has) and the other tags go on."""
    if tag in refused:
        return
    try:
        gate(*args)
    except ReleaseError as exc:
        if named is not None:
            raise
        refused[tag] = str(exc)
