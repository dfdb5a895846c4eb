"""`rebase`: move the vendored subtree and the patch series onto another vLLM tag.

The job reads as its steps (after pip's `vendoring`): load the queue, prove vendor/
is pristine + series, fetch the new pristine subtree, replay the series in a scratch
git repository (3-way, no fuzz), then either stop with a conflict report or install
the result in one swap. vendor/ and patches/ change only in that last step.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict

from release.core.errors import BadInputError, ConflictError, DirtyVendorError
from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.core.versions import version_of_tag
from release.pristine.sources import fetch
from release.pristine.tree import UpstreamTree
from release.queue.drift import drift
from release.queue.load import Queue
from release.queue.patch import Patch
from release.queue.pin import Pin
from release.queue.verified import verified_versions_text
from release.rebase.replay import Replay, replay_series
from release.rebase.report import PatchOutcome, RebaseReport, upstream_changes
from release.rebase.swap import Outputs, install
from release.train.head import move_head

STATE = "state.json"


class UpstreamState(TypedDict):
    flashinfer: str
    wheel: str
    wheel_sha256: str
    commit: str


class OutcomeState(TypedDict):
    """A PatchOutcome as saved in the state file."""

    name: str
    subject: str
    status: str
    how: str
    refreshed: bool
    conflicts: list[dict[str, object]]


class RebaseState(TypedDict):
    """The work directory's state.json: what `rebase --continue` needs to finish the run."""

    tag: str
    source: str
    dry_run: bool
    report_dir: str
    fingerprint: str
    upstream: UpstreamState
    conflicted: str
    remaining: list[str]
    applied: list[str]
    retired: list[str]
    outcomes: list[OutcomeState]


@dataclass
class RebaseOptions:
    tag: str
    source: str
    layout: Layout
    dry_run: bool = False
    report_dir: Path | None = None


def rebase(options: RebaseOptions) -> RebaseReport:
    layout = options.layout
    version_of_tag(options.tag)
    queue = Queue.load(layout)
    old_pristine = require_clean_vendor(layout, queue)
    upstream = fetch(options.tag, options.source)
    work = open_work_dir(layout, options.tag)
    try:
        repo = WorkRepo.create(work / "repo")
        # The old pristine goes in first so that `am --3way` finds each patch's pre-image blobs.
        repo.commit_subtree(old_pristine, f"vllm {queue.pin.tag} (pristine)")
        base = repo.commit_subtree(upstream.files, f"vllm {options.tag} (pristine)")
        replay = Replay()
        stopped = replay_series(repo, work, queue.patches, replay)
        if stopped is not None:
            return stop_on_conflict(options, queue, upstream, old_pristine, work, replay, stopped)
        return finish(options, queue, upstream, old_pristine, repo, base, replay, work)
    except BaseException:
        # Keep the work dir only when it holds a conflict to continue from.
        if not (work / STATE).exists():
            shutil.rmtree(work, ignore_errors=True)
        raise


def require_clean_vendor(layout: Layout, queue: Queue) -> dict[str, bytes]:
    found, pristine = drift(layout, queue)
    if found:
        listing = "; ".join(f"{d.path} ({d.kind})" for d in found)
        raise DirtyVendorError(f"vendor/ is not pristine {queue.pin.tag} + series: {listing}")
    return pristine


def open_work_dir(layout: Layout, tag: str) -> Path:
    work = layout.work / f"rebase-{tag}"
    if work.exists():
        raise BadInputError(
            f"a rebase onto {tag} is already in progress in {work}",
            hint=f"finish it with `python -m release rebase --continue {work}` or drop it with `--abort {work}`",
        )
    work.mkdir(parents=True)
    return work


# ---------------------------------------------------------------- stop / finish


def _queue_fingerprint(layout: Layout) -> str:
    digest = hashlib.sha256()
    for path in sorted(
        [layout.upstream_toml, layout.series, *layout.patches.glob("*.patch"), *layout.subtree.rglob("*.py")]
    ):
        digest.update(str(path.relative_to(layout.root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def stop_on_conflict(
    options: RebaseOptions,
    queue: Queue,
    upstream: UpstreamTree,
    old_pristine: dict[str, bytes],
    work: Path,
    replay: Replay,
    stopped: Patch,
) -> RebaseReport:
    names = [p.name for p in queue.patches]
    remaining = names[names.index(stopped.name) + 1 :]
    for name in remaining:
        replay.outcomes.append(PatchOutcome(name, "", "not-reached", "after the conflict"))
    state: RebaseState = {
        "tag": options.tag,
        "source": options.source,
        "dry_run": options.dry_run,
        "report_dir": str(options.report_dir) if options.report_dir else "",
        "fingerprint": _queue_fingerprint(options.layout),
        "upstream": {
            "flashinfer": upstream.flashinfer,
            "wheel": upstream.wheel,
            "wheel_sha256": upstream.wheel_sha256,
            "commit": upstream.commit,
        },
        "conflicted": stopped.name,
        "remaining": remaining,
        "applied": replay.applied,
        "retired": replay.retired,
        "outcomes": [
            OutcomeState(
                name=o.name,
                subject=o.subject,
                status=o.status,
                how=o.how,
                refreshed=o.refreshed,
                conflicts=[asdict(c) for c in o.conflicts],
            )
            for o in replay.outcomes
        ],
    }
    (work / STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    report = make_report(options, queue, upstream, old_pristine, replay, "conflict")
    report.work_dir = str(work)
    report.continue_command = f"python -m release rebase --continue {work}"
    report.abort_command = f"python -m release rebase --abort {work}"
    write_report(options, report)
    return report


def finish(
    options: RebaseOptions,
    queue: Queue,
    upstream: UpstreamTree,
    old_pristine: dict[str, bytes],
    repo: WorkRepo,
    base: str,
    replay: Replay,
    work: Path,
) -> RebaseReport:
    exported = repo.export(base, work / "export")
    if len(exported) != len(replay.applied):
        raise RuntimeError(f"exported {len(exported)} patches for {len(replay.applied)} applied")
    refreshed = {name: path.read_text(encoding="utf-8") for name, path in zip(replay.applied, exported, strict=True)}
    by_name = {p.name: p for p in queue.patches}
    for outcome in replay.outcomes:
        if outcome.status == "applied":
            outcome.refreshed = refreshed[outcome.name] != by_name[outcome.name].text
            if outcome.refreshed and outcome.how == "applies as it is":
                outcome.how = "applies; upstream moved its context, so the patch was refreshed"
    retired = {name: by_name[name].with_trailer("Applied-Upstream", options.tag).text for name in replay.retired}
    series = queue.series
    for name in replay.retired:
        series = series.without(name)
    pin = Pin(
        tag=options.tag,
        source=options.source,
        subtree=UPSTREAM_SUBTREE,
        flashinfer=upstream.flashinfer,
        wheel=upstream.wheel,
        wheel_sha256=upstream.wheel_sha256,
        commit=upstream.commit,
        files=upstream.file_hashes(),
    )
    head = move_head(options.layout, upstream, repo.subtree_files(), replay.retired)
    nothing = (
        pin.dumps() == options.layout.upstream_toml.read_text(encoding="utf-8")
        and not replay.retired
        and not any(o.refreshed for o in replay.outcomes)
        and (head.text is None or head.text == options.layout.train.read_text(encoding="utf-8"))
    )
    report = make_report(options, queue, upstream, old_pristine, replay, "nothing-to-do" if nothing else "done")
    if not options.dry_run:
        install(
            options.layout,
            Outputs(
                vendor=repo.subtree_files(),
                refreshed=refreshed,
                retired=retired,
                series=series.dumps(),
                pin=pin.dumps(),
                train=head.text,
            ),
        )
    if head.stranded:
        print(
            f"train: {', '.join(replay.retired)} retired as upstream in {options.tag}, but the train's "
            f"{', '.join(head.stranded)} were recorded with it: `python -m release train check` fails for them "
            "until they are removed (`train remove TAG`) or the patch returns to the series",
            file=sys.stderr,
        )
    shutil.rmtree(work, ignore_errors=True)
    write_report(options, report)
    return report


def make_report(
    options: RebaseOptions,
    queue: Queue,
    upstream: UpstreamTree,
    old_pristine: dict[str, bytes],
    replay: Replay,
    result: str,
) -> RebaseReport:
    return RebaseReport(
        old_tag=queue.pin.tag,
        new_tag=options.tag,
        source=options.source,
        wheel=upstream.wheel,
        wheel_sha256=upstream.wheel_sha256,
        commit=upstream.commit,
        flashinfer_old=queue.pin.flashinfer,
        flashinfer_new=upstream.flashinfer,
        flashinfer_verified=verified_versions_text(options.layout),
        dry_run=options.dry_run,
        result=result,
        patches=replay.outcomes,
        upstream_changes=upstream_changes(old_pristine, upstream.files),
    )


def write_report(options: RebaseOptions, report: RebaseReport) -> None:
    directory = options.report_dir or options.layout.root / "reports" / f"rebase-{options.tag}"
    md, js = report.write(directory)
    print(f"report: {md} and {js}", file=sys.stderr)


# ------------------------------------------------------------- continue / abort


def load_state(work: Path) -> RebaseState:
    state_file = work / STATE
    if not state_file.is_file():
        raise BadInputError(f"{work} holds no rebase in progress", hint="the conflict report names the work directory")
    state: RebaseState = json.loads(state_file.read_text(encoding="utf-8"))  # written by stop_on_conflict
    return state


def abort(layout: Layout, work: Path) -> None:
    load_state(work)
    shutil.rmtree(work)
    print(f"dropped {work}; vendor/ and patches/ were never changed", file=sys.stderr)


def resume(layout: Layout, work: Path) -> RebaseReport:
    """Finish a rebase whose conflict was resolved by hand in `work`/repo."""
    state = load_state(work)
    if state["fingerprint"] != _queue_fingerprint(layout):
        raise BadInputError(
            "vendor/ or patches/ changed since the rebase stopped",
            hint=f"abort with `python -m release rebase --abort {work}` and start again",
        )
    repo = WorkRepo(work / "repo")
    if repo.unmerged_paths():
        raise ConflictError(
            f"still unresolved in {repo.path}: {', '.join(repo.unmerged_paths())}",
            hint="edit the files, `git add` them, then continue again",
        )
    if repo.am_in_progress():
        result = repo.run("am", "--continue", check=False)
        if not result.ok:
            raise ConflictError(
                f"`git am --continue` failed in {repo.path}: {result.message}",
                hint="`git add` the resolved files first",
            )
    options = RebaseOptions(
        state["tag"],
        state["source"],
        layout,
        state["dry_run"],
        Path(state["report_dir"]) if state["report_dir"] else None,
    )
    queue = Queue.load(layout)
    replay = Replay(applied=state["applied"] + [state["conflicted"]], retired=state["retired"])
    for o in state["outcomes"]:
        if o["status"] == "not-reached":
            continue
        if o["name"] == state["conflicted"]:
            o = {**o, "status": "applied", "how": "conflict resolved by hand", "conflicts": []}
        replay.outcomes.append(PatchOutcome(o["name"], o["subject"], o["status"], o["how"], o["refreshed"]))
    remaining = [p for p in queue.patches if p.name in state["remaining"]]
    # The new tag's pristine tree is the commit below the patches applied before the stop.
    base = repo.run("rev-parse", f"HEAD~{len(replay.applied)}").out.strip()
    upstream = UpstreamTree(
        tag=state["tag"], source=state["source"], files=repo.subtree_files_at(base), **state["upstream"]
    )
    old_pristine = require_clean_vendor(layout, queue)
    stopped = replay_series(repo, work, remaining, replay)
    if stopped is not None:
        return stop_on_conflict(options, queue, upstream, old_pristine, work, replay, stopped)
    return finish(options, queue, upstream, old_pristine, repo, base, replay, work)
