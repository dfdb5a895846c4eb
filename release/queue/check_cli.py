"""`python -m release check`: is vendor/ exactly pristine + series?"""

from __future__ import annotations

import argparse

from release.core import log
from release.core.errors import EXIT_OK, DriftError
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.queue.gates import VariantState, unchecked_variants
from release.queue.snapshot import Checkout
from release.queue.status import check


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Undo the series on a copy of vendor/ and compare every file with the sha256 in "
        "UPSTREAM.toml; any hand edit is reported file by file, as are links, executable bits and "
        "files a patch created that are gone (exit 1). A swap a killed rebase left is finished first. "
        "Refused first (exit 2): a release line whose series is silent about a common patch; a patch with "
        "a `Bug:` trailer that names no regression test (its `Upstream-Test:` trailer or "
        "patches/upstream-tests/tests.toml; publish proves every wheel's fixes with it); a line's "
        "variant that `pq carry` made (Carried-From:) from another version of its common patch than "
        "patches/ holds (stale: run the `pq carry` the error names); a train tag whose line's series "
        "carries no patch for a bug the tag has (patches/train.toml records each tag's bugs; the scan "
        "data adds its findings), or whose line's series skips a bug's patch with no proof that the tag does "
        "without the bug (a clean pass of the bug's test on the pristine release, made by `python -m release "
        "evidence`), naming the bug, the tag and the line. When all is well, a variant made "
        "by hand (no Carried-From:) is named once as not checked."
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    # A reader: it finishes a swap a killed command left (and says so), and never waits for a writer.
    with repo_lock(layout, "check", shared=True):
        checkout = Checkout.load(layout)
        found = check(checkout)
        unchecked = [v for v in unchecked_variants(checkout) if v.state == VariantState.HAND_MADE]
    for d in found:
        log.out(d.line())
    if found:
        raise DriftError(f"vendor/ drifted from pristine + series in {len(found)} file(s)")
    log.out("vendor/ is pristine(UPSTREAM.toml) + series")
    # Said once per run, and only when everything else passed: a failure's lines stay the failure's alone.
    for variant in unchecked:
        log.note(f"note: {variant.sentence()}")
    return EXIT_OK
