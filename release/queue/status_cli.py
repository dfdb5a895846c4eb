"""`python -m release status`: the pinned tag and each patch of the series with its trailers."""

from __future__ import annotations

import argparse

from release.core import log
from release.core.errors import EXIT_OK
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.queue.snapshot import Checkout
from release.queue.status import status_lines


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = "The pinned tag, the FlashInfer pin and each patch of the series with its trailers."


def run(args: argparse.Namespace, layout: Layout) -> int:
    with repo_lock(layout, "status", shared=True):
        lines = status_lines(Checkout.load(layout))
    log.out("\n".join(lines))
    return EXIT_OK
