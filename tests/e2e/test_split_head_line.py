"""The head line split as docs/patch-queue.md says ("A head line tag that needs a variant"), on the real train.

A new `[[line]]` before the head's, with the head's modules and markers and a `[line.contains]` text
that only the older head line tags have (found here: a line of their one-sided module that the head's
pristine module lacks; none, and there is nothing to split), a series that takes every common patch;
`train remove` and `train add` move those tags onto it and `train check` holds. Then a patch stacked on
0001's file is carried onto the new line (`pq carry --line`): its variant says `Varies:` and
`Carried-From:`, and `train add` replays it on every tag of the line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_release
from helpers.synthetic import add_patch, pristine
from helpers.train import load_train
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.model.lines import read_lines
from release.model.pin import Pin
from release.model.series import Series
from release.model.source import Source
from release.pristine.sources import fetch
from release.queue.load import is_head

pytestmark = pytest.mark.network  # the head line's train tags: the cached release wheels, or range reads

ONE_SIDED = "flashinfer_nvlink_one_sided.py"
STACKED = "0002-finalize-ep-size-check.patch"
EP_SIZE = "        ep_size = self.all2all_manager.world_size\n"
SPLIT = "prepare_finalize_older"


def test_the_head_line_split_for_its_older_tags_as_the_docs_say(project: Path) -> None:
    layout = Layout(project)
    head = next(line for line in read_lines(layout.lines).lines if is_head(layout, line))
    pin = Pin.load(layout.upstream_toml).tag
    train = load_train(layout)
    older = [
        e
        for e in train.entries
        if e.line == head.name and e.tag != pin and train.tags.index(e.tag) < train.tags.index(pin)
    ]
    if not older:
        pytest.skip(f"no head line tag older than the head {pin} in the train")
    theirs = fetch(older[0].tag, Source.parse(older[0].source), lazy=True).files[ONE_SIDED].decode()
    ours = set(pristine(project)[ONE_SIDED].decode().splitlines())
    text = next(
        (t.strip() for t in theirs.splitlines() if t.strip() and t not in ours and '"' not in t and "\\" not in t), None
    )
    if text is None:
        pytest.skip(f"{older[0].tag}'s one-sided module has no line the head's lacks: nothing to split")
    moved = [e for e in older if text in fetch(e.tag, Source.parse(e.source), lazy=True).files[ONE_SIDED].decode()]

    marker = f"{UPSTREAM_SUBTREE}/{ONE_SIDED}"
    markers = ", ".join(f'"{m}"' for m in head.markers)
    block = (
        f'[[line]]\nname = "{SPLIT}"\nmodules = ["{UPSTREAM_SUBTREE}/"]\nmarkers = [{markers}]\n'
        f'series = "patches/lines/{SPLIT}/series"\n\n[line.contains]\n"{marker}" = ["{text}"]\n\n'
    )
    lines_toml = layout.lines.read_text()
    at = lines_toml.index("[[line]]")
    layout.lines.write_text(lines_toml[:at] + block + lines_toml[at:])
    (layout.patches / "lines" / SPLIT).mkdir()
    takes = "".join(f"take {name}\n" for name in Series.load(layout.series).names)
    (layout.patches / "lines" / SPLIT / "series").write_text(takes)
    assert run_release(project, "check").returncode == 0

    tags = [e.tag for e in moved]
    for tag in tags:
        assert run_release(project, "train", "remove", tag).returncode == 0
    added = run_release(project, "train", "add", *tags)
    assert added.returncode == 0, added.stderr
    assert all(getattr(load_train(layout).get(tag), "line", None) == SPLIT for tag in tags)
    checked = run_release(project, "train", "check", *tags, pin)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    add_patch(project, STACKED, ONE_SIDED, EP_SIZE, EP_SIZE + '        assert ep_size > 0, "finalize: no EP ranks"\n',
              "fused_moe: check the EP size in finalize")  # fmt: skip
    split_series = layout.patches / "lines" / SPLIT / "series"  # every older line skips it, but the new one
    split_series.write_text("".join(t for t in split_series.read_text().splitlines(True) if STACKED not in t))
    carried = run_release(project, "pq", "carry", STACKED, "--line", SPLIT, "--json")
    assert carried.returncode == 0, carried.stdout + carried.stderr
    variant = (layout.patches / "lines" / SPLIT / STACKED).read_text()
    assert f"\nVaries: {STACKED}\n" in variant and f"\nCarried-From: {STACKED} sha256:" in variant
    again = run_release(project, "train", "add", *tags)
    assert again.returncode == 0, again.stderr
    assert all(STACKED in getattr(load_train(layout).get(tag), "patches", ()) for tag in tags)
