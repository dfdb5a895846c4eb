"""`scan`'s command flow (release/scan/cli.py maps the command line to ScanOptions and calls `update`):
check the outputs can be written, scan (run.py), merge into the previous document (document.py), write
docs/affected-releases.md and the JSON the wheel ships, and say what was found."""

from __future__ import annotations

from typing import Any

from release.core import log
from release.core.errors import EXIT_OK, OutputNotWritableError
from release.core.journal import write_atomic
from release.core.layout import writable_dir_problem
from release.core.lock import repo_lock
from release.model.outcome import ReleaseStatus
from release.queue.snapshot import Checkout
from release.scan.document import build_document, dumps, load_document, to_markdown
from release.scan.run import ScanOptions, human_bytes, scan, train_versions


def update(options: ScanOptions) -> int:
    """Scan the releases `options` names and update (unless a dry run) both outputs; print what `shown` asks."""
    layout = options.layout
    if not options.dry_run:  # checked before the scan, which may take minutes, not after it
        for output in (layout.affected_json, layout.affected_md):
            problem = writable_dir_problem(output.parent)
            if problem:
                raise OutputNotWritableError(f"cannot write {output}: {problem}; nothing was scanned")
    # A scan writes docs/affected-releases.md and the runtime's JSON from what it read of the queue: it holds the
    # lock from that read to its write, so a rebase or pq command cannot change the queue between them (a dry
    # run writes nothing and only reads, as `check` does).
    with repo_lock(layout, "scan", shared=options.dry_run):
        return _update(options)


def _update(options: ScanOptions) -> int:
    layout = options.layout
    previous = load_document(layout.affected_json)
    # The command's one read of the queue, the lines and the train, handed to every stage below.
    checkout = Checkout.load(layout)
    train = train_versions(checkout)
    result = scan(options, checkout)
    document, dropped = build_document(result, options, previous, train)
    if dropped:
        log.note(
            f"dropped {len(dropped)} release(s) classified for other patches before: {', '.join(dropped)}; rescan them"
        )
    moved = result.transfer
    log.note(
        f"scanned {len(result.results)} release(s) in {result.seconds:.1f} s: "
        f"{human_bytes(moved.bytes)} downloaded in {moved.requests} request(s)"
    )
    markdown = to_markdown(document)
    if not options.dry_run:
        write_atomic(layout.affected_json, dumps(document).encode("utf-8"))
        layout.affected_md.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(layout.affected_md, markdown.encode("utf-8"))
        log.note(f"wrote {layout.affected_md} and {layout.affected_json}")
    if options.shown == "json":
        log.out(dumps(document), end="")
    elif options.shown == "markdown":
        log.out(markdown, end="")
    else:
        log.out(summary(document, [r.version for r in result.results]))
    return EXIT_OK


def summary(document: dict[str, Any], scanned: list[str]) -> str:
    """What a scan found, in a few lines: how many releases of each status, from the oldest to the newest,
    and the affected ones that the train does not ship yet (what to act on)."""
    releases = document["releases"]
    out = [f"scanned {len(scanned)} release(s); the document holds {len(releases)}"]
    for status in ReleaseStatus:
        these = [v for v in scanned if releases[v]["status"] == status]
        if these:
            span = ", ".join(these) if len(these) <= 3 else f"{these[0]} … {these[-1]}"
            out.append(f"  {status.value:<13} {len(these):>3}  {span}")
    missing = [v for v in scanned if releases[v]["status"] == ReleaseStatus.AFFECTED and not releases[v]["in_train"]]
    if missing:
        out.append(f"affected and not in the train: {', '.join(missing)}")
    if document.get("fixed_in"):
        out.append(f"fixed upstream in {document['fixed_in']}")
    out.append("the whole table: --markdown (docs/affected-releases.md); the JSON document: --json")
    return "\n".join(out)
