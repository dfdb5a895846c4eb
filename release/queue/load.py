"""The patch queue on disk: pin, series and patches, loaded and validated together."""

from __future__ import annotations

from dataclasses import dataclass

from release.core.errors import MalformedSeriesError
from release.core.layout import Layout
from release.queue.patch import Patch
from release.queue.pin import Pin
from release.queue.series import Series


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
