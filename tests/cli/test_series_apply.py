"""release/queue/replay.py applies and undoes a series with real `git apply` (issue 39: one module does both).

The checkout's own vendor/ and patches/ are the data: undoing the series recovers a pristine tree that
applying it turns back into vendor/, byte for byte; a patch that does not apply is named in the caller's error.
"""

from __future__ import annotations

import pytest

from release.core.errors import PatchQueueTreeError
from release.core.layout import PROJECT_ROOT, Layout
from release.queue.load import Queue
from release.queue.replay import apply_series, unapply


def test_undoing_then_applying_the_series_gives_vendor_back() -> None:
    layout = Layout(PROJECT_ROOT)
    queue = Queue.load(layout)
    vendor = layout.vendor_files()
    assert queue.patches, "the checkout's series is empty: nothing to check"
    pristine, blocked = unapply(vendor, queue.patches)
    assert blocked == {}
    assert pristine != vendor
    assert apply_series(pristine, queue.patches, PatchQueueTreeError) == vendor
    with pytest.raises(PatchQueueTreeError, match=queue.patches[0].name):
        apply_series(vendor, queue.patches[:1], PatchQueueTreeError)  # already applied: it does not apply again
