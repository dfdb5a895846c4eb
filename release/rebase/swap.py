"""Put a finished rebase in place: vendor/ subtree, UPSTREAM.toml and patches/ change as one.

The outputs become a list of journal outputs (release.core.journal): the new subtree, the
whole new patches/ directory (with patches/train.toml when the train's head moved) and the
new pin. The journal makes the change survive a SIGKILL at any instant: the next command that takes the
repository lock finishes it and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core.journal import Output, commit
from release.core.layout import Layout, read_tree


@dataclass
class Outputs:
    vendor: dict[str, bytes]
    refreshed: dict[str, str]  # patch name -> text
    retired: dict[str, str]  # patch name -> text with Applied-Upstream set
    unretired: list[str]  # retired patches back in the series (their text is in `refreshed`)
    series: str
    pin: str
    train: str | None = None  # patches/train.toml with the head's entry moved; None: no train here


def plan(layout: Layout, outputs: Outputs) -> list[Output]:
    """The journal outputs: every path that changes, each with its complete new content."""
    patches_rel = _relative(layout, layout.patches)
    patches = read_tree(layout.patches)
    for name, text in outputs.refreshed.items():
        patches[name] = text.encode("utf-8")
    for name, text in outputs.retired.items():
        patches[f"retired/{name}"] = text.encode("utf-8")
        patches.pop(name, None)
    for name in outputs.unretired:
        patches.pop(f"retired/{name}", None)
    patches["series"] = outputs.series.encode("utf-8")
    if outputs.train is not None:
        # train.toml lives in patches/, so it changes in the same journaled output as the series.
        patches[layout.train.relative_to(layout.patches).as_posix()] = outputs.train.encode("utf-8")
    return [
        Output(_relative(layout, layout.subtree), files=dict(outputs.vendor)),
        Output(patches_rel, files=patches),
        Output(_relative(layout, layout.upstream_toml), data=outputs.pin.encode("utf-8")),
    ]


def install(layout: Layout, outputs: Outputs, what: str, discard: list[Path] | None = None) -> None:
    """Swap the outputs in as one journaled change; `discard` (the work dir) goes with it."""
    commit(layout, plan(layout, outputs), what, discard)


def _relative(layout: Layout, path: Path) -> str:
    return path.relative_to(layout.root).as_posix()
