"""`rebase`'s job: move vendor/ and patches/ onto another vLLM tag (scan/run.py classifies, moves nothing).

The job reads as its steps (after pip's `vendoring`): load the queue, prove vendor/
is pristine + series, fetch the new pristine subtree, replay the series in a scratch
git repository (3-way, no fuzz), then either stop with a conflict report or install
the result in one swap. vendor/ and patches/ change only in that last step.

Longer than 500 lines on purpose: the job, its resume (`--continue`, `--abort`) and its state file share
the run object; the report (report.py) and the swap (swap.py) live apart.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import NotRequired, TypedDict

from release.core import log
from release.core.errors import (
    AfterSwapError,
    ConflictError,
    OlderTagError,
    OutputNotWritableError,
    WorkDirError,
)
from release.core.faults import fault_point
from release.core.files import present, read_text
from release.core.git import WorkRepo
from release.core.journal import write_atomic
from release.core.layout import Layout, writable_dir_problem
from release.core.lock import repo_lock
from release.core.parse import parse_json
from release.core.versions import canonical_tag, parse_version
from release.model.outcome import PatchOutcome, PatchStatus
from release.model.patch import APPLIED_UPSTREAM, Patch, refuse_carriage_returns
from release.model.pin import Pin
from release.model.source import Source
from release.model.tree import UpstreamTree
from release.pristine.sources import fetch
from release.queue.load import Queue, rebase_patches
from release.queue.replay import Replay, replay_series, start
from release.queue.snapshot import Checkout
from release.queue.verified import verified_versions_text
from release.rebase.head import move_head
from release.rebase.report import RebaseReport, retirements, upstream_changes
from release.rebase.swap import Outputs, install

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


class Resolved(TypedDict):
    """How `rebase --continue` committed the hand resolution (saved so a killed --continue can redo the rest)."""

    head: str
    status: str  # PatchStatus APPLIES, or UPSTREAM when the resolution is upstream's version


class RebaseState(TypedDict):
    """The work directory's state.json: what `rebase --continue` needs to finish the run."""

    tag: str
    source: str
    dry_run: bool
    report_dir: str
    fingerprint: str
    upstream: UpstreamState
    base: str  # the new tag's pristine commit in the scratch repo
    stopped_at: str  # HEAD under the half-applied patch
    conflicted: str
    remaining: list[str]
    applied: list[str]
    retired: list[str]
    outcomes: list[OutcomeState]
    resolved: NotRequired[Resolved]


@dataclass(frozen=True)
class RebaseOptions:
    """What the command asked for, made once at the CLI edge (or from a stopped run's state) and never changed.

    The tag is held in its one spelling (`canonical_tag`), so every step, file name and report
    uses the same one; a tag that is no release tag is refused here, before anything is read.
    """

    tag: str
    source: Source
    layout: Layout
    dry_run: bool = False
    report_dir: Path | None = None
    allow_older: bool = False  # move the head to an older tag on purpose (refused otherwise)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tag", canonical_tag(self.tag))

    @property
    def reports(self) -> Path:
        """Where rebase-report.md and .json go: --report, or reports/rebase-TAG/."""
        return self.report_dir or self.layout.root / "reports" / f"rebase-{self.tag}"


@dataclass(frozen=True)
class RebaseRun:
    """One rebase under way, what every step after the replay works on (as pip's `vendoring` passes its
    `Configuration` to each step): the options, the checkout it started from (read once under the lock:
    vendor/ and patches/ change only in the swap, so every step reads the state the run began with), the
    new pristine tree, the scratch repository in the work directory, and what the replay found so far."""

    options: RebaseOptions
    checkout: Checkout
    upstream: UpstreamTree
    old_pristine: dict[str, bytes]  # the head's pristine tree, for the report's upstream changes
    work: Path  # .work/rebase-TAG/: the scratch repo, and state.json once it stops at a conflict
    base: str  # the new tag's pristine commit in the scratch repo
    replay: Replay
    # The series as the new tag takes it: a retired patch too where the tag is older than its upstream release.
    patches: list[Patch]

    @property
    def queue(self) -> Queue:
        return self.checkout.queue

    @property
    def repo(self) -> WorkRepo:
        return WorkRepo(self.work / "repo")


def rebase(options: RebaseOptions) -> RebaseReport:
    with repo_lock(options.layout, "rebase"):
        return _rebase(options)


def _rebase(options: RebaseOptions) -> RebaseReport:
    layout = options.layout
    check_report_dir(options)
    checkout = Checkout.load(layout)  # under the lock: the state every step of the run reads, up to the swap
    queue = checkout.queue
    if present(layout.train):
        # A malformed train, or one without the head, is refused now, before anything is fetched or replayed.
        checkout.require_train().require_head(layout.train, queue.pin.tag)
    refuse_backwards(options, queue.pin.tag)
    old_pristine = checkout.pristine()
    upstream = fetch(options.tag, options.source)
    work = open_work_dir(layout, options.tag)
    try:
        fault_point("rebase:work-dir")
        repo = WorkRepo.create(work / "repo")
        # The old pristine goes in first, with the series applied on it, so that `am --3way` finds each
        # patch's pre-image blobs (a second patch on a file: the file as the first left it).
        base = start(repo, work, upstream.files, f"vllm {options.tag} (pristine)", old_pristine, queue.patches)
        patches = rebase_patches(layout, queue, options.tag, checkout.patch)
        run = RebaseRun(options, checkout, upstream, old_pristine, work, base, Replay(), patches)
        return replay_then_stop_or_finish(run, patches)
    except BaseException:
        # Keep the work dir only when it holds a conflict to continue from.
        if not (work / STATE).exists():
            shutil.rmtree(work, ignore_errors=True)
        raise


def replay_then_stop_or_finish(run: RebaseRun, patches: list[Patch]) -> RebaseReport:
    """Replay `patches` onto the run's scratch repo; stop at the first conflict, or install the result."""
    stopped = replay_series(run.repo, run.work, patches, run.replay, run.upstream)
    if stopped is not None:
        return stop_on_conflict(run, stopped)
    return finish(run)


def direction(old_tag: str, new_tag: str) -> str:
    """forward, backward or same: where a rebase from the head `old_tag` onto `new_tag` moves it."""
    old, new = (parsed[0].key if (parsed := parse_version(tag)) else (0, 0, 0, 0) for tag in (old_tag, new_tag))
    return "same" if new == old else "backward" if new < old else "forward"


def refuse_backwards(options: RebaseOptions, head: str) -> None:
    """An older tag moves vendor/ and the train's head back: refused unless asked for, and said either way.

    The README's rebase command names a fixed tag; run in a checkout whose head has since moved
    past it, it would quietly undo that move. A dry run writes nothing, so it goes on and says so.
    """
    if direction(head, options.tag) != "backward":
        return
    if not (options.allow_older or options.dry_run):
        raise OlderTagError(
            f"{options.tag} is older than the head {head}: the rebase would move vendor/, UPSTREAM.toml and the "
            "head of the train backwards; nothing was changed"
        )
    what = "would move" if options.dry_run else "moves"
    log.note(f"note: {options.tag} is older than the head {head}: this rebase {what} the head backwards")


def check_report_dir(options: RebaseOptions) -> None:
    """An unwritable --report is bad input now, not a failure after vendor/ changed."""
    problem = writable_dir_problem(options.reports)
    if problem:
        raise OutputNotWritableError(f"cannot write the report to {options.reports}: {problem}")


def open_work_dir(layout: Layout, tag: str) -> Path:
    work = layout.work / f"rebase-{tag}"
    if work.exists() and not (work / STATE).is_file():
        # We hold the repository lock, so no rebase is running there: a killed run left it before
        # it stopped at a conflict, and it holds nothing to continue from.
        shutil.rmtree(work)
        log.note(f"note: removed {work}, left by a rebase that was killed before it stopped at a conflict")
    if work.exists():
        raise WorkDirError(
            f"a rebase onto {tag} is already in progress: it stopped at a conflict in {work}",
            hint=f"finish it with `python -m release rebase --continue {work}` or drop it with `--abort {work}`",
        )
    work.mkdir(parents=True)
    return work


# ---------------------------------------------------------------- stop / finish


def _queue_fingerprint(layout: Layout) -> str:
    digest = hashlib.sha256()
    for path in sorted(
        [
            layout.upstream_toml,
            layout.series,
            *layout.patches.glob("*.patch"),
            *layout.retired.glob("*.patch"),
            *layout.subtree.rglob("*.py"),
        ]
    ):
        digest.update(str(path.relative_to(layout.root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def stop_on_conflict(run: RebaseRun, stopped: Patch) -> RebaseReport:
    """Keep the work directory with a state.json that `--continue` finishes from, and report the conflict.

    A dry run reports the conflict (hunk by hunk, both sides) and keeps nothing: it writes only the report,
    so no work directory is left that a later rebase onto the tag would have to `--abort` first."""
    options, replay, upstream = run.options, run.replay, run.upstream
    names = [p.name for p in run.patches]
    remaining = names[names.index(stopped.name) + 1 :]
    for name in remaining:
        replay.outcomes.append(PatchOutcome(name, "", PatchStatus.NOT_REACHED, "after the conflict"))
    if options.dry_run:
        report = make_report(run, "conflict")
        shutil.rmtree(run.work, ignore_errors=True)
        write_report(options, report)
        return report
    state: RebaseState = {
        "tag": options.tag,
        "source": str(options.source),
        "dry_run": options.dry_run,
        "report_dir": str(options.report_dir.absolute()) if options.report_dir else "",
        "fingerprint": _queue_fingerprint(options.layout),
        "upstream": {
            "flashinfer": upstream.flashinfer,
            "wheel": upstream.wheel,
            "wheel_sha256": upstream.wheel_sha256,
            "commit": upstream.commit,
        },
        "base": run.base,  # the new tag's pristine commit in the scratch repo
        "stopped_at": run.repo.head(),  # HEAD under the half-applied patch
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
    save_state(run.work, state)
    fault_point("rebase:state")
    report = make_report(run, "conflict")
    report.work_dir = str(run.work)
    report.continue_command = f"python -m release rebase --continue {run.work}"
    report.abort_command = f"python -m release rebase --abort {run.work}"
    write_report(options, report)
    return report


def save_state(work: Path, state: RebaseState) -> None:
    # Atomic: a kill while writing leaves the previous state (or none), never half a file.
    write_atomic(work / STATE, (json.dumps(state, indent=2) + "\n").encode("utf-8"))


def finish(run: RebaseRun) -> RebaseReport:
    """Every patch applied or retired: export the refreshed series and install it all in one swap."""
    options, queue, replay, repo, work = run.options, run.queue, run.replay, run.repo, run.work
    refreshed = export_refreshed(run)
    by_name = {p.name: p for p in run.patches}
    retired = {name: by_name[name].with_trailer(APPLIED_UPSTREAM, options.tag).text for name in replay.retired}
    series = queue.series
    for name in replay.retired:
        series = series.retire(name)  # kept in its place: every tag older than options.tag still replays it
    # A retired patch that applies on the new tag (older than its upstream release) is back in the series.
    unretired = [name for name in replay.applied if name in queue.series.retired]
    for name in unretired:
        series = series.unretire(name)
    # Committed files name a wheel by its name and sha256, never by where it lay (`wheel:/abs/x.whl`).
    upstream = replace(run.upstream, source=str(options.source.recorded()))
    pin = Pin.of(upstream, upstream.source)
    head = move_head(run.checkout, upstream, repo.subtree_files(), replay.applied, refreshed)
    nothing = (
        pin.dumps() == options.layout.upstream_toml.read_text(encoding="utf-8")
        and not replay.retired
        and not unretired
        and not any(o.refreshed for o in replay.outcomes)
        and (head.text is None or head.text == options.layout.train.read_text(encoding="utf-8"))
    )
    report = make_report(run, "nothing-to-do" if nothing else "done")
    report.retirements = retirements(run.checkout, options.tag, replay.retired, unretired)
    if options.dry_run:
        shutil.rmtree(work, ignore_errors=True)
    else:
        outputs = Outputs(
            vendor=repo.subtree_files(),
            refreshed=refreshed,
            retired=retired,
            unretired=unretired,
            series=series.dumps(),
            pin=pin.dumps(),
            train=head.text,
        )
        # The work dir goes with the swap (the journal discards it), so no state outlives the change.
        install(options.layout, outputs, f"rebase {queue.pin.tag} -> {options.tag}", discard=[work])
        fault_point("rebase:swapped")
    for retirement in report.retirements:
        log.warn(f"train: {retirement.sentence()}")
    try:
        write_report(options, report)
    except OSError as exc:
        if options.dry_run:
            raise OutputNotWritableError(f"cannot write the report: {exc}") from None
        raise AfterSwapError(
            f"the rebase onto {options.tag} is done (vendor/, patches/ and UPSTREAM.toml changed), "
            f"but its report could not be written: {exc}"
        ) from None
    return report


def export_refreshed(run: RebaseRun) -> dict[str, str]:
    """Each applied patch as `format-patch` writes it on the new tag; the outcomes say which changed."""
    replay = run.replay
    exported = run.repo.export(run.base, run.work / "export")
    if len(exported) != len(replay.applied):
        raise RuntimeError(f"exported {len(exported)} patches for {len(replay.applied)} applied")
    # As bytes (read_text would turn a CR into LF), and refused before the swap if git wrote a CR.
    refreshed = {name: path.read_bytes().decode("utf-8") for name, path in zip(replay.applied, exported, strict=True)}
    for name, text in refreshed.items():
        refuse_carriage_returns(name, text)
    by_name = {p.name: p for p in run.patches}
    for outcome in replay.outcomes:
        if outcome.status == PatchStatus.APPLIES:
            outcome.refreshed = refreshed[outcome.name] != by_name[outcome.name].text
            if outcome.refreshed and outcome.how == "applies as it is":
                outcome.how = "applies; upstream moved its context, so the patch was refreshed"
    return refreshed


def make_report(run: RebaseRun, result: str) -> RebaseReport:
    options, queue, upstream = run.options, run.queue, run.upstream
    return RebaseReport(
        old_tag=queue.pin.tag,
        new_tag=options.tag,
        source=str(options.source),
        wheel=upstream.wheel,
        wheel_sha256=upstream.wheel_sha256,
        commit=upstream.commit,
        flashinfer_old=queue.pin.flashinfer,
        flashinfer_new=upstream.flashinfer,
        flashinfer_verified=verified_versions_text(options.layout),
        dry_run=options.dry_run,
        result=result,
        patches=run.replay.outcomes,
        upstream_changes=upstream_changes(run.old_pristine, upstream.files),
        direction=direction(queue.pin.tag, options.tag),
    )


def write_report(options: RebaseOptions, report: RebaseReport) -> None:
    md, js = report.write(options.reports)
    log.note(f"report: {md} and {js} (this run's own copy: {md.parent / report.run}/)")


# ------------------------------------------------------------- continue / abort


def work_dir(layout: Layout, given: Path) -> Path:
    """The work directory a user named: relative to here or to the checkout, and nothing but a rebase's."""
    candidates = [given] if given.is_absolute() else [Path.cwd() / given, layout.root / given]
    found = next((c for c in candidates if c.exists()), candidates[0])
    work = found.resolve()
    if work.parent != layout.work.resolve() or not work.name.startswith("rebase-"):
        raise WorkDirError(f"{given} is not a rebase work directory (.work/rebase-TAG/ of {layout.root})")
    if not work.is_dir():
        raise WorkDirError(f"{given} does not exist: no rebase is stopped there")
    return work


def load_state(work: Path) -> RebaseState:
    state_file = work / STATE
    if not state_file.is_file():
        raise WorkDirError(
            f"{work} holds no conflict to continue: a rebase was killed there before it stopped",
            hint=f"drop it with `python -m release rebase --abort {work}`, or start the rebase again "
            "(it removes the leftover by itself)",
        )
    try:
        # written by stop_on_conflict; a special file or a too-deep nesting is damage like any other
        text = read_text(state_file, error=WorkDirError)
        state: RebaseState = parse_json(text, where=str(state_file), error=ValueError)
        missing = [k for k in ("tag", "source", "fingerprint", "conflicted", "remaining", "applied", "retired",
                               "outcomes", "upstream", "dry_run", "report_dir", "base") if k not in state]  # fmt: skip
        if missing:
            raise KeyError(", ".join(missing))
        resolved = [state["resolved"]["status"]] if "resolved" in state else []
        for status in [o["status"] for o in state["outcomes"]] + resolved:
            PatchStatus(status)  # ValueError: damaged, or written before rebase said "applies" (it said "applied")
    except (ValueError, KeyError, TypeError) as exc:
        raise WorkDirError(
            f"{state_file} is damaged ({exc.__class__.__name__}: {exc})",
            hint=f"drop it with `python -m release rebase --abort {work}` and start the rebase again",
        ) from None
    return state


def abort(layout: Layout, given: Path) -> None:
    with repo_lock(layout, "rebase --abort"):
        work = work_dir(layout, given)
        had_state = (work / STATE).is_file()
        shutil.rmtree(work)
        what = "its conflict" if had_state else "a killed rebase's leftovers"
        log.note(f"dropped {work} ({what}); vendor/ and patches/ were never changed")


def resume(layout: Layout, given: Path) -> RebaseReport:
    with repo_lock(layout, "rebase --continue"):
        return _resume(layout, work_dir(layout, given))


def _resume(layout: Layout, work: Path) -> RebaseReport:
    """Finish a rebase whose conflict was resolved by hand in `work`/repo."""
    state = load_state(work)
    if state["fingerprint"] != _queue_fingerprint(layout):
        raise WorkDirError(
            "vendor/ or patches/ changed since the rebase stopped",
            hint=f"abort with `python -m release rebase --abort {work}` and start again",
        )
    repo = WorkRepo(work / "repo")
    if "resolved" not in state:
        state["resolved"] = resolve_conflict(repo, state)
        save_state(work, state)
    else:
        # A --continue was killed after the conflict was resolved: replay the rest again from there.
        if repo.am_in_progress():
            repo.run("am", "--quit")
        repo.run("reset", "--quiet", "--hard", state["resolved"]["head"])
    options = RebaseOptions(
        tag=state["tag"],
        source=Source.parse(state["source"]),
        layout=layout,
        dry_run=state["dry_run"],
        report_dir=Path(state["report_dir"]) if state["report_dir"] else None,
    )
    check_report_dir(options)
    # Under the lock, and unchanged since the stop (the fingerprint above): the state the run finishes from.
    checkout = Checkout.load(layout)
    queue = checkout.queue
    if present(layout.train):
        # A malformed train, or one without the head, is refused now, before anything is fetched or replayed.
        checkout.require_train().require_head(layout.train, queue.pin.tag)
    conflicted, status = state["conflicted"], PatchStatus(state["resolved"]["status"])
    replay = Replay(
        applied=state["applied"] + ([conflicted] if status == PatchStatus.APPLIES else []),
        retired=state["retired"] + ([conflicted] if status == PatchStatus.UPSTREAM else []),
    )
    for o in state["outcomes"]:
        if o["status"] == PatchStatus.NOT_REACHED:
            continue
        if o["name"] == conflicted:
            how = (
                "conflict resolved by hand"
                if status == PatchStatus.APPLIES
                else "conflict resolved to upstream's version (the patch became empty): retired"
            )
            o = {**o, "status": status, "how": how, "conflicts": []}
        replay.outcomes.append(
            PatchOutcome(o["name"], o["subject"], PatchStatus(o["status"]), o["how"], o["refreshed"])
        )
    patches = rebase_patches(layout, queue, state["tag"], checkout.patch)
    remaining = [p for p in patches if p.name in state["remaining"]]
    base = state["base"]  # the new tag's pristine commit, recorded at the stop
    upstream = UpstreamTree(
        tag=state["tag"], source=state["source"], files=repo.subtree_files_at(base), **state["upstream"]
    )
    old_pristine = checkout.pristine()
    run = RebaseRun(options, checkout, upstream, old_pristine, work, base, replay, patches)
    return replay_then_stop_or_finish(run, remaining)


def resolve_conflict(repo: WorkRepo, state: RebaseState) -> Resolved:
    """Commit the hand resolution of the stopped patch; an empty one retires it (upstream's version)."""
    if repo.unmerged_paths():
        raise ConflictError(
            f"still unresolved in {repo.path}: {', '.join(repo.unmerged_paths())}",
            hint="edit the files, `git add` them, then continue again",
        )
    status = PatchStatus.APPLIES
    if repo.am_in_progress():
        if not repo.run("diff", "--cached", "--quiet", "HEAD", check=False).ok:
            result = repo.run("am", "--continue", check=False)
            if not result.ok:
                raise ConflictError(
                    f"`git am --continue` failed in {repo.path}: {result.message or '(git said nothing)'}",
                    hint="`git add` the resolved files first",
                )
        else:
            # Nothing left to commit: the resolution is upstream's version, so the patch is already there.
            repo.run("am", "--skip")
            status = PatchStatus.UPSTREAM
    elif state.get("stopped_at") and repo.head() == state["stopped_at"]:
        # The maintainer ran `git am --skip` (or --abort) by hand: nothing of ours is left.
        status = PatchStatus.UPSTREAM
    return Resolved(head=repo.head(), status=status)
