"""`pq carry` and `pq skip`: what each older release line says of a common patch, written and reported."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core import log
from release.core.errors import EXIT_CONFLICT, EXIT_OK
from release.core.layout import Layout
from release.pq.carry import carry, carry_all, reports_json, reports_markdown, skip


@dataclass(frozen=True)
class CarryOptions:
    """What `pq carry` was asked: one PATCH or every patch (--all), onto some lines (None: every line)."""

    patch: str | None = None
    every: bool = False
    lines: tuple[str, ...] | None = None
    json: bool = False
    report: Path | None = None


@dataclass(frozen=True)
class SkipOptions:
    """What `pq skip` was asked: the line that does without PATCH, and why."""

    patch: str
    line: str
    reason: str


def carry_patches(layout: Layout, options: CarryOptions) -> int:
    """`pq carry`: the report of every line on stdout (Markdown or JSON); exit 3 where the head line conflicts."""
    lines = list(options.lines) if options.lines is not None else None
    if options.every:
        done = carry_all(layout, lines, options.report)
    else:
        done = [carry(layout, options.patch or "", lines, options.report)]
    log.out(reports_json(done) if options.json else reports_markdown(done), end="")
    return EXIT_CONFLICT if any(r.head_conflicts for r in done) else EXIT_OK


def skip_patch(layout: Layout, options: SkipOptions) -> int:
    """`pq skip`: the skip written into the line's series, and the file named on stdout."""
    where = skip(layout, options.patch, options.line, options.reason)
    log.out(f"wrote {where.relative_to(layout.root).as_posix()}: skip {options.patch} ({options.reason})")
    return EXIT_OK
