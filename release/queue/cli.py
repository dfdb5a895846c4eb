"""`python -m release check` and `status`: is vendor/ exactly pristine + series?"""

from __future__ import annotations

import argparse

from release.core.errors import EXIT_OK, DriftError
from release.core.layout import Layout


def configure_check(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Undo the series on a copy of vendor/ and compare every file with the sha256 in "
        "UPSTREAM.toml; any hand edit is reported file by file."
    )


def run_check(args: argparse.Namespace, layout: Layout) -> int:
    from release.queue.status import check

    found = check(layout)
    for d in found:
        print(d.line())
    if found:
        raise DriftError(f"vendor/ drifted from pristine + series in {len(found)} file(s)")
    print("vendor/ is pristine(UPSTREAM.toml) + series")
    return EXIT_OK


def configure_status(parser: argparse.ArgumentParser) -> None:
    parser.description = "The pinned tag, the FlashInfer pin and each patch of the series with its trailers."


def run_status(args: argparse.Namespace, layout: Layout) -> int:
    from release.queue.status import status_lines

    print("\n".join(status_lines(layout)))
    return EXIT_OK
