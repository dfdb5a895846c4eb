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
    lines = list(options.lines) if options.lines is not None else None
    return run_carry(layout, options.patch, options.every, lines, options.json, options.report)


def skip_patch(layout: Layout, options: SkipOptions) -> int:
    where = skip(layout, options.patch, options.line, options.reason)
    log.out(f"wrote {where.relative_to(layout.root).as_posix()}: skip {options.patch} ({options.reason})")
    return EXIT_OK


def run_carry(
    layout: Layout, patch: str | None, every: bool, lines: list[str] | None, as_json: bool, report: Path | None
) -> int:
    done = carry_all(layout, lines, report) if every else [carry(layout, patch or "", lines, report)]
    log.out(reports_json(done) if as_json else reports_markdown(done), end="")
    return EXIT_CONFLICT if any(r.head_conflicts for r in done) else EXIT_OK
