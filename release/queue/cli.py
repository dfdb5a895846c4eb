"""`python -m release check` and `status`: is vendor/ exactly pristine + series?"""

from __future__ import annotations

import argparse

from release.core import log
from release.core.errors import EXIT_OK, DriftError
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.queue.status import check, status_lines


def configure_check(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Undo the series on a copy of vendor/ and compare every file with the sha256 in "
        "UPSTREAM.toml; any hand edit is reported file by file, as are links, executable bits and "
        "files a patch created that are gone. A swap a killed rebase left is finished first."
    )


def run_check(args: argparse.Namespace, layout: Layout) -> int:
    # A reader: it finishes a swap a killed command left (and says so), and never waits for a writer.
    with repo_lock(layout, "check", shared=True):
        found = check(layout)
    for d in found:
        log.out(d.line())
    if found:
        raise DriftError(f"vendor/ drifted from pristine + series in {len(found)} file(s)")
    log.out("vendor/ is pristine(UPSTREAM.toml) + series")
    return EXIT_OK


def configure_status(parser: argparse.ArgumentParser) -> None:
    parser.description = "The pinned tag, the FlashInfer pin and each patch of the series with its trailers."


def run_status(args: argparse.Namespace, layout: Layout) -> int:
    with repo_lock(layout, "status", shared=True):
        lines = status_lines(layout)
    log.out("\n".join(lines))
    return EXIT_OK
