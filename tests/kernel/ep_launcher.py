"""Run one EP group of rank processes on this machine, with a deadline per case.

Each rank is its own process (what torchrun would start: MASTER_ADDR/MASTER_PORT, RANK,
WORLD_SIZE, LOCAL_RANK in the environment; the rank program joins a gloo group with them).
Several ranks may share one GPU. A rank program reports what it does as JSON lines in the
file named by `--events PATH` (appended to its arguments):

  {"event": "plan", "cases": [{"id": ..., "group": ..., "label": ...}, ...]}   what it will run
  {"event": "setup", "group": G, "what": ...}     building something (workspace, JIT module)
  {"event": "group", "group": G, "can_run": bool, "reason": ...}   whether group G can run here
  {"event": "start", "case": ID}                  a case begins
  {"event": "result", "case": ID, "passed": bool, "skipped": bool, ...}  a case ends
  {"event": "evidence", "group": G, ...}          what the group ran (entry points, workspaces)
  {"event": "done"}

A rank that stays in one case longer than `case_deadline_s`, or in setup (process start,
imports, a workspace, a JIT build) longer than `setup_deadline_s`, is taken as hung: every
rank is stopped, the case is reported failed with the backend (group), EP size and case
named, and the cases of that group that had not run are reported as not run. With
`restart`, the ranks are started again for the groups after it (`--skip-group G` is added
to their arguments for each group that hung), so one backend's hang does not hide another's
results.

Stdlib only: the CPU suite tests this file with a rank double (tests/kernel/rank_double.py),
and the GPU machine runs it with nothing of ours installed.

Longer than 500 lines on purpose: it also runs standalone on a GPU machine (tests/kernel/run_on_device.sh
carries it there), so it holds its launcher, deadlines and event reader in one file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KERNEL_CONTRACT = HERE / "kernel_contract.py"
POLL_S = 0.05
TERM_GRACE_S = 5.0
# NVLink multicast stays off in every rank (it can take a shared host's GPUs down).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

PASSED, FAILED, SKIPPED, NOT_RUN = "passed", "failed", "skipped", "not run"


class LauncherInputError(ValueError):
    """The launcher was asked for something it cannot run; raised before any process starts."""


@dataclass
class CaseOutcome:
    case: str
    group: str
    label: str
    rank: int
    status: str  # PASSED, FAILED, SKIPPED or NOT_RUN
    reason: str = ""
    wall_s: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Hang:
    ep_size: int
    group: str
    case: str  # the case id, or "setup"
    label: str
    ranks: dict[int, str]  # rank -> where it was when stopped
    after_s: float
    message: str


@dataclass
class GroupSummary:
    group: str
    ep_size: int
    can_run: bool | None = None  # None: no rank said
    reason: str = ""
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    not_run: int = 0
    wall_s: float = 0.0  # first start to last result of the group, over all ranks
    evidence: dict[int, dict[str, Any]] = field(default_factory=dict)  # rank -> what it ran

    @property
    def verdict(self) -> str:
        if self.failed or self.not_run:
            return FAILED
        if self.passed:
            return PASSED
        return SKIPPED


@dataclass
class EpRun:
    ep_size: int
    program: list[str]
    wall_s: float = 0.0
    outcomes: list[CaseOutcome] = field(default_factory=list)
    groups: dict[str, GroupSummary] = field(default_factory=dict)
    hangs: list[Hang] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    launches: int = 0
    log_tails: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(g.verdict != FAILED for g in self.groups.values()) and not self.crashes and not self.hangs

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for name, group in self.groups.items():
            data["groups"][name]["verdict"] = group.verdict
        return data


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _RankState:
    """What one rank has reported so far, read incrementally from its events file."""

    def __init__(self, rank: int, events: Path, started: float) -> None:
        self.rank, self.events = rank, events
        self.offset = 0
        self.buffer = ""
        self.where = "setup"  # "setup" or a case id
        self.where_group = ""
        self.since = started
        self.done = False
        self.results: dict[str, dict[str, Any]] = {}
        self.plan: list[dict[str, str]] | None = None

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.events.open("r", encoding="utf-8") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
                self.offset = handle.tell()
        except FileNotFoundError:
            return []
        self.buffer += chunk
        lines = self.buffer.split("\n")
        self.buffer = lines.pop()  # an unfinished last line waits for the next read
        return [json.loads(line) for line in lines if line.strip()]


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every rank's process group, then SIGKILL what is left (a rank spinning in a kernel)."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return text[-chars:]


def _launch_once(
    ep_size: int,
    program: list[str],
    args: list[str],
    workdir: Path,
    attempt: int,
    case_deadline_s: float,
    setup_deadline_s: float,
    env: dict[str, str],
    run: EpRun,
) -> tuple[list[dict[str, str]] | None, dict[int, _RankState], Hang | None]:
    """Start the ranks once and watch them until all are done, one fails, or one hangs."""
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    states: dict[int, _RankState] = {}
    started = time.monotonic()
    logs = []
    try:
        for rank in range(ep_size):
            events = workdir / f"attempt{attempt}-rank{rank}.events.jsonl"
            log_path = workdir / f"attempt{attempt}-rank{rank}.log"
            rank_env = {
                **os.environ,
                **env,
                **SAFE_ENV,
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "RANK": str(rank),
                "WORLD_SIZE": str(ep_size),
                "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(ep_size),
                "PYTHONUNBUFFERED": "1",
            }
            log = log_path.open("wb")
            logs.append(log)
            processes.append(
                subprocess.Popen(
                    [*program, *args, "--events", str(events)],
                    env=rank_env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: _stop reaches its children
                )
            )
            states[rank] = _RankState(rank, events, started)
        run.launches += 1
        hang: Hang | None = None
        plan: list[dict[str, str]] | None = None
        labels: dict[str, tuple[str, str]] = {}
        while True:
            now = time.monotonic()
            for state in states.values():
                for event in state.read():
                    kind = event.get("event")
                    if kind == "plan":
                        state.plan = list(event["cases"])
                        plan = plan or state.plan
                        labels.update({c["id"]: (c["group"], c.get("label", c["id"])) for c in state.plan})
                    elif kind == "setup":
                        state.where, state.where_group, state.since = "setup", str(event.get("group", "")), now
                    elif kind == "start":
                        state.where, state.since = str(event["case"]), now
                        state.where_group = labels.get(state.where, ("", ""))[0]
                    elif kind == "result":
                        state.results[str(event["case"])] = {**event, "_at": now}
                        state.where, state.since = "between cases", now
                    elif kind == "group":
                        group = run.groups.setdefault(str(event["group"]), GroupSummary(str(event["group"]), ep_size))
                        can_run = bool(event["can_run"])
                        # A group runs only where every rank can run it; the first reason wins.
                        if group.can_run is None or (group.can_run and not can_run):
                            group.can_run, group.reason = can_run, str(event.get("reason", ""))
                    elif kind == "evidence":
                        group = run.groups.setdefault(str(event["group"]), GroupSummary(str(event["group"]), ep_size))
                        group.evidence[state.rank] = {k: v for k, v in event.items() if k not in ("event", "group")}
                    elif kind == "done":
                        state.done = True
            codes = [p.poll() for p in processes]
            for rank, code in enumerate(codes):
                if code not in (None, 0) and not states[rank].done:
                    # It may have written "done" after the read above; a rank program exits 1
                    # when one of its cases failed, which the results already say.
                    for event in states[rank].read():
                        if event.get("event") == "result":
                            states[rank].results[str(event["case"])] = {**event, "_at": now}
                        elif event.get("event") == "done":
                            states[rank].done = True
            failed = [rank for rank, code in enumerate(codes) if code not in (None, 0) and not states[rank].done]
            if failed:
                # One rank died: the others would wait for it in their next collective.
                _stop(processes)
                for rank in failed:
                    state = states[rank]
                    for event in state.read():  # what it wrote before it died
                        if event.get("event") == "result":
                            state.results[str(event["case"])] = {**event, "_at": now}
                        elif event.get("event") == "start":
                            state.where = str(event["case"])
                    message = (
                        f"EP {ep_size}, rank {rank} exited with {codes[rank]} in "
                        f"{state.where_group or '-'} / {labels.get(state.where, ('', state.where))[1]}"
                    )
                    run.crashes.append(message + ":\n" + _tail(workdir / f"attempt{attempt}-rank{rank}.log"))
                    if state.where in labels and state.where not in state.results:
                        state.results[state.where] = {"case": state.where, "passed": False, "error": message}
                break
            if all(code is not None for code in codes):
                break
            for state in states.values():
                if state.done:
                    continue
                in_setup = state.where in ("setup", "between cases")
                limit = setup_deadline_s if in_setup else case_deadline_s
                if now - state.since > limit:
                    stuck_group, label = labels.get(state.where, (state.where_group, state.where))
                    where = {
                        s.rank: ("done" if s.done else f"{s.where_group or '-'} / {s.where} for {now - s.since:.0f}s")
                        for s in states.values()
                    }
                    hang = Hang(
                        ep_size=ep_size,
                        group=stuck_group or "-",
                        case=state.where if not in_setup else "setup",
                        label=label,
                        ranks=where,
                        after_s=now - state.since,
                        message=(
                            f"deadline: EP {ep_size}, backend {stuck_group or '-'}, case {label}: rank {state.rank} "
                            f"made no progress for {now - state.since:.0f}s (limit {limit:.0f}s); all ranks stopped"
                        ),
                    )
                    break
            if hang is not None:
                _stop(processes)
                break
            time.sleep(POLL_S)
        # Events written just before the ranks ended.
        for state in states.values():
            for event in state.read():
                if event.get("event") == "result":
                    state.results[str(event["case"])] = {**event, "_at": time.monotonic()}
                elif event.get("event") == "evidence":
                    group = run.groups.setdefault(str(event["group"]), GroupSummary(str(event["group"]), ep_size))
                    group.evidence[state.rank] = {k: v for k, v in event.items() if k not in ("event", "group")}
                elif event.get("event") == "done":
                    state.done = True
                elif event.get("event") == "plan" and plan is None:
                    plan = list(event["cases"])
        for rank in states:
            run.log_tails[rank] = _tail(workdir / f"attempt{attempt}-rank{rank}.log", 1500)
        return plan, states, hang
    finally:
        _stop(processes)
        for log in logs:
            log.close()


def run_ep(
    ep_size: int,
    args: list[str] | None = None,
    program: list[str] | None = None,
    case_deadline_s: float = 60.0,
    setup_deadline_s: float = 300.0,
    restart: bool = True,
    workdir: Path | None = None,
    env: dict[str, str] | None = None,
) -> EpRun:
    """Run `program` (default: kernel_contract.py) as `ep_size` ranks; every case gets an outcome."""
    if ep_size < 1:
        raise LauncherInputError(f"EP size must be at least 1, got {ep_size}")
    if case_deadline_s <= 0 or setup_deadline_s <= 0:
        raise LauncherInputError(
            f"deadlines must be positive, got case {case_deadline_s}s and setup {setup_deadline_s}s"
        )
    program = list(program or [sys.executable, str(KERNEL_CONTRACT)])
    base_args = list(args or [])
    run = EpRun(ep_size=ep_size, program=program)
    started = time.monotonic()
    own_dir = None
    if workdir is None:
        own_dir = tempfile.TemporaryDirectory(prefix=f"ep{ep_size}-")
        workdir = Path(own_dir.name)
    workdir.mkdir(parents=True, exist_ok=True)
    skipped_groups: list[str] = []
    hung_groups: list[str] = []
    seen: dict[tuple[str, int], CaseOutcome] = {}
    full_plan: list[dict[str, str]] = []
    try:
        for attempt in range(8):  # one launch, plus one restart per group that hung
            launch_args = [*base_args, *(a for g in skipped_groups for a in ("--skip-group", g))]
            plan, states, hang = _launch_once(
                ep_size,
                program,
                launch_args,
                workdir,
                attempt,
                case_deadline_s,
                setup_deadline_s,
                env or {},
                run,
            )
            if plan is not None and not full_plan:
                full_plan = plan
            for state in states.values():
                for case_id, result in state.results.items():
                    case = next((c for c in full_plan if c["id"] == case_id), {"group": "-", "label": case_id})
                    status = SKIPPED if result.get("skipped") else (PASSED if result.get("passed") else FAILED)
                    detail = {k: v for k, v in result.items() if k not in ("event", "case", "_at")}
                    seen[(case_id, state.rank)] = CaseOutcome(
                        case_id,
                        case["group"],
                        case.get("label", case_id),
                        state.rank,
                        status,
                        str(result.get("reason", result.get("error", ""))),
                        detail.get("wall_s"),
                        detail,
                    )
            if hang is None:
                break
            run.hangs.append(hang)
            for state in states.values():
                if hang.case != "setup" and (hang.case, state.rank) not in seen:
                    seen[(hang.case, state.rank)] = CaseOutcome(
                        hang.case, hang.group, hang.label, state.rank, FAILED, hang.message
                    )
            hung_groups.append(hang.group)
            # The next launch skips the group that hung and every group already complete.
            groups = list(dict.fromkeys(c["group"] for c in full_plan))
            complete = [
                g
                for g in groups
                if all((c["id"], r) in seen for c in full_plan if c["group"] == g for r in range(ep_size))
            ]
            skipped_groups = list(dict.fromkeys([*hung_groups, *complete]))
            if not restart or hang.group not in groups or all(g in skipped_groups for g in groups):
                break
        for case in full_plan:
            for rank in range(ep_size):
                if (case["id"], rank) in seen:
                    continue
                hung = next((h for h in run.hangs if h.group == case["group"]), None)
                why = (
                    f"not run: the ranks were stopped after {hung.label} hung ({hung.message})"
                    if hung
                    else "not run: the ranks ended before this case (see crashes)"
                )
                seen[(case["id"], rank)] = CaseOutcome(
                    case["id"], case["group"], case.get("label", case["id"]), rank, NOT_RUN, why
                )
        run.outcomes = sorted(seen.values(), key=lambda o: (_plan_index(full_plan, o.case), o.rank))
        _summarise(run)
    finally:
        run.wall_s = time.monotonic() - started
        if own_dir is not None:
            own_dir.cleanup()
    return run


def _plan_index(plan: list[dict[str, str]], case_id: str) -> int:
    return next((i for i, c in enumerate(plan) if c["id"] == case_id), len(plan))


def _summarise(run: EpRun) -> None:
    for outcome in run.outcomes:
        group = run.groups.setdefault(outcome.group, GroupSummary(outcome.group, run.ep_size))
        if outcome.status == PASSED:
            group.passed += 1
        elif outcome.status == FAILED:
            group.failed += 1
        elif outcome.status == SKIPPED:
            group.skipped += 1
        else:
            group.not_run += 1
    for name, group in run.groups.items():
        times = [float(o.detail["ended_at"]) for o in run.outcomes if o.group == name and o.detail.get("ended_at")]
        starts = [float(o.detail["started_at"]) for o in run.outcomes if o.group == name and o.detail.get("started_at")]
        if times and starts:
            group.wall_s = round(max(times) - min(starts), 3)
        if group.can_run is None and any(h.group == name and h.case == "setup" for h in run.hangs):
            group.can_run, group.reason = False, next(h.message for h in run.hangs if h.group == name)


def save_report(run: EpRun, name: str) -> Path | None:
    """Keep a run's JSON where the device scripts collect reports (KERNEL_REPORT_DIR), if set."""
    where = os.environ.get("KERNEL_REPORT_DIR")
    if not where:
        return None
    path = Path(where) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run.to_json(), indent=1) + "\n")
    return path


def format_summary(runs: list[EpRun]) -> str:
    """One Markdown row per (EP size, backend): what a person reads in the log."""
    rows = [
        "| EP | backend | can run | passed | failed | skipped | not run | wall s |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for name, group in sorted(run.groups.items()):
            can = "yes" if group.can_run else ("no: " + group.reason if group.can_run is False else "-")
            rows.append(
                f"| {run.ep_size} | {name} | {can} | {group.passed} | {group.failed} | {group.skipped} | "
                f"{group.not_run} | {group.wall_s:.1f} |"
            )
    for run in runs:
        rows += [f"\n{hang.message}; ranks: {hang.ranks}" for hang in run.hangs]
        rows += [f"\ncrash: {crash[:600]}" for crash in run.crashes]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Arguments after `--` go to the rank program (kernel_contract.py: --backend, --tokens, --top-k, ...).",
    )
    parser.add_argument(
        "--ep", type=int, action="append", help="EP sizes to run, each as that many ranks (default 2 4)"
    )
    parser.add_argument("--case-deadline", type=float, default=60.0, help="seconds a rank may spend in one case")
    parser.add_argument(
        "--setup-deadline", type=float, default=300.0, help="seconds for process start, imports, workspaces, JIT"
    )
    parser.add_argument("--no-restart", action="store_true", help="after a hang, do not restart for other backends")
    parser.add_argument("--program", nargs="+", help="rank program argv (default: this python, kernel_contract.py)")
    parser.add_argument("--json", type=Path, help="write every EP run here")
    parser.add_argument("--workdir", type=Path, help="keep the ranks' events and logs here")
    argv = list(sys.argv[1:] if argv is None else argv)
    rank_args: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, rank_args = argv[:at], argv[at + 1 :]
    args = parser.parse_args(argv)
    sizes = args.ep or [2, 4]
    runs = []
    for ep_size in sizes:
        workdir = args.workdir / f"ep{ep_size}" if args.workdir else None
        try:
            run = run_ep(
                ep_size,
                rank_args,
                args.program,
                args.case_deadline,
                args.setup_deadline,
                restart=not args.no_restart,
                workdir=workdir,
            )
        except LauncherInputError as exc:
            parser.error(str(exc))
        runs.append(run)
        print(format_summary([run]), flush=True)
    if args.json:
        args.json.write_text(json.dumps([run.to_json() for run in runs], indent=1) + "\n")
    return 0 if all(run.ok for run in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
