"""`train check [TAG...]`: every tag (or the named ones) reproduces its recorded hashes, said per tag."""

from __future__ import annotations

from dataclasses import dataclass

from release.core import log
from release.core.errors import EXIT_OK, TrainDriftError
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.queue.snapshot import Checkout
from release.train.check import check_train


@dataclass(frozen=True)
class CheckOptions:
    """What `train check` was asked: only these tags (none: every tag of the train)."""

    tags: tuple[str, ...] = ()


def verify(layout: Layout, options: CheckOptions) -> int:
    """One line per tag, then exit 0, or TrainDriftError naming each tag and file that differ.

    A reader: it finishes a swap a killed command left (and says so), and never waits for a writer."""
    with repo_lock(layout, "train check", shared=True):
        return _verify(layout, list(options.tags))


def _verify(layout: Layout, tags: list[str]) -> int:
    results = check_train(Checkout.load(layout), tags or None)  # under the lock: read once
    for result in results:
        if result.ok:
            log.out(f"ok    {result.tag}  ({result.seconds:.2f} s)")
        for finding in result.findings:
            log.out(f"FAIL  {finding.line()}")
    bad = [r for r in results if not r.ok]
    if bad:
        named = "; ".join(f"{r.tag} ({', '.join(sorted({f.file for f in r.findings}))})" for r in bad)
        raise TrainDriftError(
            f"train check: {len(bad)} of {len(results)} tags do not reproduce their recorded hashes: {named}"
        )
    log.out(f"train check: all {len(results)} tags reproduce their recorded pristine and patched sha256")
    return EXIT_OK
