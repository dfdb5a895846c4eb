"""`pq export`: the work tree written back, the head's into patches/ and vendor/, a line's into its variants."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from release.core import log
from release.core.errors import EXIT_OK, BadInputError
from release.core.layout import Layout
from release.pq.export import export_queue
from release.pq.line import export_line, is_line_tree
from release.pq.report import show_export, shown


@dataclass(frozen=True)
class ExportOptions:
    """What `pq export` was asked: the work tree, --check (write nothing) and --json."""

    dir: Path
    check: bool = False
    json: bool = False


def write_back(layout: Layout, options: ExportOptions) -> int:
    """`pq export`: a line's tree into its variants and series, else the head's into patches/ and vendor/."""
    path, check_only, as_json = options.dir, options.check, options.json
    if is_line_tree(path):
        if check_only:
            raise BadInputError(f"{shown(path)} is a release line's tree: `pq export --check` is for the head's")
        done = export_line(layout, path)
        if as_json:
            log.out(json.dumps(done.__dict__, indent=2))
            return EXIT_OK
        for name in done.variants:
            log.out(f"{name}  variant of line {done.line}")
        log.out(f"wrote {', '.join(done.written)}" if done.written else "nothing to write")
        if done.written:
            log.out("next: `python -m release check`, then `python -m release train add --all`")
        return EXIT_OK
    return show_export(export_queue(layout, path, check_only), path, check_only, as_json)
