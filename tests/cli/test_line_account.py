"""Every release line accounts for every common patch, as real processes on a copy of the checkout (offline).

A synthetic second patch, 0002 (a shape check in the two-sided `finalize`, made here, never committed
to the series), is added to patches/series and vendor/. Until each older line's series says something
about it (its variant, `take NAME`, or `skip NAME: why`), `check` and `train check` refuse with exit 2,
naming every silent line and the patch, before any release is read; `pq skip` writes the third answer.
"""

from __future__ import annotations

from pathlib import Path

from helpers import run_release, snapshot
from helpers.failure import failed
from helpers.synthetic import SHAPE_CHECK_PATCH, add_shape_check
from release.core.errors import SilentLineError
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.series import EntryKind, Series
from release.queue.load import is_head

NEW = SHAPE_CHECK_PATCH


def test_a_line_silent_about_a_common_patch_is_refused_until_it_says_something(project: Path) -> None:
    add_shape_check(project)
    layout = Layout(project)
    older = [line for line in read_lines(layout.lines).lines if not is_head(layout, line)]
    assert older
    before = snapshot(project)
    for args in (["check"], ["train", "check"], ["train", "add", "--all"]):
        refused = run_release(project, *args, env={"VLLM_FUSED_MOE_INDEX_URL": "http://127.0.0.1:9/simple/"})
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
        error = failed(refused)
        assert error.reference == SilentLineError.reference, (args, refused.stderr)
        for line in older:  # every silent line is named in the one error
            said = f"line {line.name} ({line.series}) is silent about {NEW}"
            assert said in error.message, (args, error)
    assert snapshot(project) == before

    # `take` a patch outside the line's modules is no answer either: it is refused as outside the line.
    first = older[0]
    series = first.series_path(project)
    series.write_text(series.read_text() + f"take {NEW}\n")
    refused = run_release(project, "check")
    assert refused.returncode == 2 and f"{NEW}: touches" in refused.stderr and "outside" in refused.stderr
    series.write_bytes(before[first.series])
    # A bare name of a common patch in a line's series is refused too: it says `take` or it is a variant.
    series.write_text(series.read_text() + f"{NEW}\n")
    refused = run_release(project, "check")
    assert refused.returncode == 2 and "is a common patch, not a variant of this line" in refused.stderr
    assert f"write `take {NEW}`" in refused.stderr
    series.write_bytes(before[first.series])

    for line in older:
        done = run_release(project, "pq", "skip", NEW, "--line", line.name, "--reason", "a test's check")
        assert done.returncode == 0, done.stderr
        entries = Series.load(line.series_path(project), common=layout.patches).entries
        assert entries[-1].kind == EntryKind.SKIP and entries[-1].name == NEW and entries[-1].reason == "a test's check"
    again = run_release(project, "pq", "skip", NEW, "--line", older[0].name, "--reason", "twice")
    assert again.returncode == 2 and f"already says `skip {NEW}: a test's check`" in again.stderr
    checked = run_release(project, "check")
    assert checked.returncode == 0, checked.stderr
