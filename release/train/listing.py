"""`train list`: the train as a table, or as JSON for machines, one row per tag.

Each row says where the tag comes from, its FlashInfer range (its own pin intersected with
VERIFIED.toml where a patch it carries relies on FlashInfer) and what its overlay carries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TypedDict

from release.core import log
from release.core.errors import EXIT_OK
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.queue.load import named_patch
from release.queue.snapshot import Checkout
from release.queue.verified import wheel_range


class TrainRow(TypedDict):
    """One tag of `train list --json` (its keys are what the JSON holds)."""

    tag: str
    version: str
    head: bool
    line: str
    source: str
    wheel: str
    wheel_sha256: str
    commit: str
    flashinfer_pin: str
    # None: no verified FlashInfer fits, the tag does not build; "": no patch it carries relies on FlashInfer
    flashinfer_range: str | None
    files: int
    patches: list[str]  # what its replay applies, in order (train.toml `patches`)
    bugs: list[str]  # the bugs those patches fix (their Bug: ids); empty: it carries downstream changes only
    carries: str  # "bug" (there for a bug) or "downstream" (only downstream changes)
    patched_files: list[str]
    pristine: dict[str, str]
    patched: dict[str, str]


def rows(checkout: Checkout) -> tuple[str, list[TrainRow]]:
    layout = checkout.layout
    head = checkout.queue.pin.tag
    train = checkout.require_train().require_head(layout.train, head)
    verified = checkout.verified
    lines = checkout.lines
    out: list[TrainRow] = []
    for e in train.entries:
        found = [named_patch(layout, lines.get(e.line), name, checkout.patch) for name in e.patches]
        bugs = sorted({p.purpose.bug for p in found if p is not None and p.purpose.bug})
        out.append(
            {
                "tag": e.tag,
                "version": e.version,
                "head": e.tag == head,
                "line": e.line,
                "source": e.source,
                "wheel": e.wheel,
                "wheel_sha256": e.wheel_sha256,
                "commit": e.commit,
                "flashinfer_pin": e.flashinfer,
                # What the tag's wheel will require; null: no verified version fits, the tag does not build;
                # "": it carries no patch that relies on FlashInfer (Depends-On), so it requires nothing of it.
                "flashinfer_range": wheel_range(verified, e.flashinfer, [p for p in found if p is not None]),
                "files": len(e.pristine),
                "patches": list(e.patches),
                "bugs": bugs,
                "carries": "bug" if bugs else "downstream",
                "patched_files": sorted(n for n, d in e.patched.items() if e.pristine.get(n) != d),
                "pristine": e.pristine,
                "patched": e.patched,
            }
        )
    return head, out


@dataclass(frozen=True)
class ListOptions:
    """What `train list` was asked: JSON for machines, or the table."""

    json: bool = False


def list_train(layout: Layout, options: ListOptions) -> int:
    """`train list`: the table (or JSON) on stdout; a reader of the checkout, it never waits for a writer."""
    with repo_lock(layout, "train list", shared=True):
        return _list(Checkout.load(layout), options.json)


def _list(checkout: Checkout, as_json: bool) -> int:
    if as_json:
        head, table = rows(checkout)
        log.out(json.dumps({"head": head, "releases": table}, indent=2, sort_keys=True))
    else:
        log.out(table_text(checkout), end="")
    return EXIT_OK


def table_text(checkout: Checkout) -> str:
    head, table = rows(checkout)
    header = ("tag", "line", "from", "flashinfer pin", "wheel requires", "patched files", "carries")
    lines = [
        (
            f"{r['tag']}{' *' if r['head'] else ''}",
            r["line"],
            r["wheel"] or (f"{r['source']} @ {r['commit'][:12]}" if r["commit"] else r["source"]),
            (r["flashinfer_pin"] or "?").removeprefix("flashinfer-python"),
            "none verified: not built" if r["flashinfer_range"] is None else r["flashinfer_range"] or "(nothing)",
            f"{len(r['patched_files'])} of {r['files']}",
            carries(r),
        )
        for r in table
    ]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    out = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *lines]
    ]
    out.append(f"* the head: vendor/ holds {head}; {len(table)} tags in patches/train.toml")
    return "\n".join(out) + "\n"


def carries(row: TrainRow) -> str:
    """What a tag's overlay is there for: the bugs it fixes (by their patches' numbers), or downstream only."""
    numbers = ", ".join(name.split("-", 1)[0] for name in row["patches"])
    if row["carries"] == "bug":
        return f"bug fix ({numbers})"
    return f"downstream only ({numbers})" if numbers else "nothing"
