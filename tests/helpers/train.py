"""The train as a test reads it: patches/train.toml, held to the release lines patches/lines.toml names.

Train.load takes the line names (release/ reads them once per command, through its Checkout); a test
that only wants the train reads both files here, without loading the whole queue.
"""

from __future__ import annotations

from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.train import Train


def load_train(layout: Layout) -> Train:
    return Train.load(layout.train, [line.name for line in read_lines(layout.lines).lines])
