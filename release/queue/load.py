"""The patch queue on disk: pin, series and patches, loaded and validated together."""

from __future__ import annotations

from dataclasses import dataclass

from release.core.errors import MalformedSeriesError
from release.core.layout import Layout
from release.model.lines import Line
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.series import Series


@dataclass(frozen=True)
class Queue:
    pin: Pin
    series: Series
    patches: list[Patch]

    @classmethod
    def load(cls, layout: Layout) -> Queue:
        pin = Pin.load(layout.upstream_toml)
        if not layout.patches.is_dir():
            raise MalformedSeriesError(
                f"{layout.patches} is {'not a directory' if layout.patches.exists() else 'missing'}",
                hint="restore patches/ from git (`git checkout -- patches`)",
            )
        series = Series.load(layout.series)
        patches = [Patch.load(layout.patches / name) for name in series.names]
        return cls(pin, series, patches)


def line_patches(layout: Layout, line: Line) -> list[Patch]:
    """The series a line takes: its own variants (patches/lines/<line>/) first, else the common patch.

    The head line's series is patches/series itself, so it is exactly `Queue.load(layout).patches`.
    """
    if line.series_path(layout.root) == layout.series:
        return Queue.load(layout).patches
    own = line.patch_dir(layout.root)
    series = Series.load(line.series_path(layout.root), common=layout.patches)
    patches = []
    for name in series.names:
        path = own / name if (own / name).is_file() else layout.patches / name
        patches.append(Patch.load(path, line.prefixes))
    return patches
