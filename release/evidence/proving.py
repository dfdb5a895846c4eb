"""`evidence`'s job: prove each named release line's `skip` of a bug's patch (release/evidence/cli.py maps the
command line to EvidenceOptions and calls `prove_skips`).

The releases are a line's train tags (`--line`), or the tags named (`--tag`), each on its recorded line,
`--on`'s, or the scan data's; each is proven by skips.py, and the proof is kept where `check` and
`train add` read it (release/queue/skip_proof.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from release.core import log
from release.core.errors import EXIT_OK, BadInputError, UnprovenSkipError
from release.core.files import present
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.core.versions import canonical_tag, version_of_tag
from release.evidence import progress
from release.evidence.skips import SkipRun, prove
from release.model.train import Train
from release.queue.snapshot import Checkout


@dataclass(frozen=True)
class EvidenceOptions:
    """What `evidence` proves: every train tag of `line`, or `tags` (on `on`'s line where given), under `python`."""

    python: str | None  # None: each line's proving environment (release/evidence/envs.py)
    line: str | None = None
    tags: tuple[str, ...] = ()
    on: str | None = None


def targets(checkout: Checkout, options: EvidenceOptions) -> list[tuple[str, str]]:
    """(tag, line) for each release to prove, from the checkout as the command read it."""
    train = checkout.require_train() if present(checkout.layout.train) else Train(())
    if options.line:
        checkout.line(options.line)  # an unknown line is refused, naming the known ones
        found = [(e.tag, e.line) for e in train.entries if e.line == options.line]
        if not found:
            raise BadInputError(f"no train tag is on line {options.line}", hint="give the tags: --tag TAG --on LINE")
        return found
    data = checkout.scan or {}
    found = []
    for text in options.tags:
        tag = canonical_tag(text)
        entry = train.get(tag)
        scanned = data.get("releases", {}).get(version_of_tag(tag))
        line = options.on or (entry.line if entry else "") or (scanned or {}).get("line", "")
        if not isinstance(line, str) or not line:
            raise BadInputError(f"{tag} is on no line the train or the scan data knows", hint="name it: --on LINE")
        checkout.line(line)
        found.append((tag, line))
    return found


def prove_skips(layout: Layout, options: EvidenceOptions) -> int:
    """Prove every target's skips, say each result, and refuse (exit 2) where one is not proven."""
    runs: list[SkipRun] = []
    # A reader of the checkout, as `check` is: the skips it proves are those of one read of it.
    with repo_lock(layout, "evidence", shared=True):
        checkout = Checkout.load(layout)
    with progress.heartbeat("evidence"):
        for tag, line in targets(checkout, options):
            proved = prove(checkout, tag, line, options.python)
            if not proved:
                log.out(f"{tag} (line {line}): its line skips no bug's patch; nothing to prove")
            runs += proved
    for skip in runs:
        log.out(skip.sentence())
    failed = [r for r in runs if not r.proven]
    if failed:
        raise UnprovenSkipError(
            what=f"{len(failed)} skip(s) not proven",
            skips=[r.sentence().removeprefix("not proven: ") for r in failed],
            hint="where the test fails, the release has the bug: carry the fix to the line "
            "(`python -m release pq carry NAME`) instead of skipping it; nothing was changed",
        )
    return EXIT_OK
