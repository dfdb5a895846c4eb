"""A built wheel into --out: copied beside its final name and renamed into place."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from release.core import log
from release.core.errors import OutputNotWritableError
from release.core.journal import copy_atomic, remove_leftovers
from release.overlay.target import BuildResult


def deliver(result: BuildResult, out: Path) -> BuildResult:
    """Copy the wheel into --out beside its final name and rename it into place (copy_atomic).

    A build killed at any instant leaves under the final name the wheel that was there before,
    or the whole new one; never a truncated file that looks complete. A kill during the copy
    leaves a hidden `.NAME.whl.tmp-PID` that neither pip, `publish` nor `*.whl` picks up and that
    the next build into --out removes, saying so.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        target = out / result.wheel.name
        removed = remove_partial_wheels(out) + copy_atomic(result.wheel, target)
    except OSError as exc:
        raise OutputNotWritableError(f"cannot write the wheel into {out}: {exc}") from None
    for leftover in removed:
        log.note(f"note: removed {leftover}, the partial copy of a killed build")
    return replace(result, wheel=target)


def remove_partial_wheels(out: Path) -> list[Path]:
    """The partial copies killed builds left in --out, of any wheel (each named by its final name)."""
    removed: list[Path] = []
    for leftover in sorted(out.glob(".*.whl.tmp-*")):
        removed += remove_leftovers(out / leftover.name[1:].rsplit(".tmp-", 1)[0])
    return removed
