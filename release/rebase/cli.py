"""`python -m release rebase`: move vendor/ and patches/ onto another vLLM tag."""

from __future__ import annotations

import argparse

from release.core import flags, log
from release.core.errors import EXIT_CONFLICT, EXIT_OK, BadInputError, TransportError
from release.core.layout import Layout
from release.model.source import DEFAULT_SOURCE, Source

SOURCES = f"""sources (--from):
  git+URL    a remote git repository, fetched at the tag only, depth 1, no blobs but
             the subtree's (default: {DEFAULT_SOURCE})
  git:PATH   a local clone (read with ls-tree/cat-file, never checked out)
  dir:PATH   a tree laid out like vLLM's (PATH/vllm/model_executor/...)
  wheel:PATH a vLLM release wheel, a regular file of at most 1 GiB (only the subtree is
             read, each file checked against the wheel's RECORD; a member with an absolute
             or `..` name anywhere is refused); recorded as wheel:NAME with the file's
             sha256, never the directory it lay in, and kept in the wheel cache by that
             sha256, where train check and build --all find it again (or on the index,
             where NAME and the sha256 are its release file)
  pypi       the release wheel of TAG on the package index ($VLLM_FUSED_MOE_INDEX_URL,
             default PyPI): its name must be the canonical wheel name of TAG; the whole
             wheel is downloaded once into $VLLM_FUSED_MOE_CACHE (default
             ~/.cache/vllm-fused-moe/wheels) and used only if its sha256 is the index's
             (checked again at every use; a corrupt one is downloaded again), then each
             member is checked against RECORD

network reads (pypi, git+URL): each request waits at most $VLLM_FUSED_MOE_HTTP_TIMEOUT s
(default 30) for bytes, each whole read at most $VLLM_FUSED_MOE_HTTP_DEADLINE s (default
900); 429, 5xx and resets are retried $VLLM_FUSED_MOE_HTTP_RETRIES times (default 3) with
backoff. A transport that still breaks is exit 4, one line, nothing changed.
"""

DESCRIPTION = (
    "Re-vendor the subtree from TAG and replay patches/series on it with `git am --3way` "
    "(never fuzz). Each patch ends applied (refreshed to the new context), upstream "
    "(retired to patches/retired/ with Applied-Upstream set) or in conflict (stop; "
    "vendor/ and patches/ stay byte-for-byte as they were). Refused at once (exit 2): a TAG that is no "
    "release tag (vX.Y.Z[.postN], at most 40 characters), a --report that cannot be a directory, a "
    "patches/train.toml without the head's entry (or an empty one)."
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = SOURCES
    parser.add_argument("tag", nargs="?", help="the vLLM release tag, e.g. v0.21.0")
    flags.add_from(parser, default=DEFAULT_SOURCE, help="where to read TAG from (see below)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="classify and report; write nothing but the report (on a conflict too: exit 3, no work directory "
        "is kept, so nothing needs --abort)",
    )
    parser.add_argument(
        "--allow-older",
        action="store_true",
        help="rebase onto a tag older than the head, moving vendor/ and the head of the train backwards "
        "(refused with exit 2 otherwise; a --dry-run goes on and says so)",
    )
    flags.add_report(
        parser,
        metavar="DIR",
        help="where rebase-report.md and .json go (default: reports/rebase-TAG/): the newest run's; every "
        "run's own pair is kept in DIR/runs/NNNN/, never overwritten",
    )
    parser.add_argument(
        "--continue", dest="resume", type=flags.path, metavar="WORKDIR", help="finish a rebase stopped by a conflict"
    )
    parser.add_argument("--abort", type=flags.path, metavar="WORKDIR", help="drop a rebase stopped by a conflict")


def run(args: argparse.Namespace, layout: Layout) -> int:
    # Imported here: `rebase --help` and `--abort` need none of the readers of a release behind it.
    from release.rebase import run as rebase

    if args.abort:
        rebase.abort(layout, args.abort)
        return EXIT_OK
    if args.resume:
        report = rebase.resume(layout, args.resume)
    else:
        if not args.tag:
            raise BadInputError("rebase needs a TAG", hint="e.g. `python -m release rebase v0.21.0 --from pypi`")
        options = rebase.RebaseOptions(
            tag=args.tag,
            source=Source.parse(args.source),
            layout=layout,
            dry_run=args.dry_run,
            report_dir=args.report,
            allow_older=args.allow_older,
        )
        try:
            report = rebase.rebase(options)
        except TransportError as exc:
            if args.source != DEFAULT_SOURCE:
                raise
            raise TransportError(
                str(exc),
                hint=f"without --from, TAG is read from vLLM's git repository ({DEFAULT_SOURCE}); "
                f"`python -m release rebase {args.tag} --from pypi` reads its release wheel from PyPI instead. "
                + TransportError.default_hint,
            ) from None
    log.out(report.to_markdown())
    return EXIT_CONFLICT if report.result == "conflict" else EXIT_OK
