"""`build`: the head's overlay wheel `vllm-fused-moe`, from vendor/ (`build --all` and `--tag`: train_build.py).

The build is a list of named steps over one `BuildPlan`, each in a module of its own: refuse what cannot
be built (dirt.py), collect the facts (the checkout as the command read it under its lock: pin, series,
the tag's FlashInfer range: its own pin ∩ VERIFIED.toml), stage the package and build it (make.py,
stage.py, release/overlay/backend.py), deliver it into --out (deliver.py) and record its patch level
(levels.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from release.core.errors import BadInputError
from release.core.lock import repo_lock
from release.model.lines import HEAD_LINE
from release.overlay.deliver import deliver
from release.overlay.dirt import checked_inputs, refuse_unwritable_or_missing
from release.overlay.levels import record_levels
from release.overlay.make import backend_for, build_target
from release.overlay.project import PROJECT as PROJECT  # publish.py names it from here
from release.overlay.target import BuildPlan, BuildResult, head_target
from release.queue.bugs import missing_fixes, refuse_missing_fixes
from release.queue.gates import refuse_unrecorded
from release.queue.snapshot import Checkout
from release.queue.verified import flashinfer_range


def build(plan: BuildPlan) -> BuildResult:
    """The head's wheel, from vendor/ (what `python -m release build` makes)."""
    with repo_lock(plan.layout, "build"):
        refuse_unwritable_or_missing(plan)
        checkout = Checkout.load(plan.layout)  # under the lock: every stage below reads the checkout from it
        dirty = checked_inputs(plan, checkout)
        pin = checkout.queue.pin
        patches = checkout.queue.patches
        if not patches:
            raise BadInputError(
                f"not building {pin.tag}: patches/series applies nothing at the head (every patch retired); "
                "an overlay would ship vLLM's own files",
                hint="build the tags that carry something: `python -m release build --all`",
            )
        entry = checkout.train_entry(pin.tag)
        line = entry.line if entry is not None else HEAD_LINE
        what = f"not building {pin.tag}"
        refuse_missing_fixes(what, pin.tag, missing_fixes(checkout, pin.tag, patches), [p.name for p in patches], line)
        if entry is not None and not dirty:  # a dirty build says so in its version; publish refuses it
            refuse_unrecorded(what, entry, patches)
            if plan.patch_level is not None:
                entry.refuse_level(plan.patch_level)
        flashinfer = flashinfer_range(checkout.verified, pin.tag, pin.flashinfer, patches)
        target = head_target(checkout, flashinfer, entry)
        with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-build-") as scratch, backend_for(plan) as backend:
            result = build_target(plan, target, Path(scratch), dirty, backend)
            delivered = deliver(result, plan.out)
            record_levels(plan, [result], checkout.train)
            return delivered
