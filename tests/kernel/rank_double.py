"""Test double for a GPU rank program (kernel_contract.py), for the launcher's own CPU tests.

The real rank needs a GPU and FlashInfer; this one speaks the same events protocol
(ep_launcher.py's docstring) and can hang, crash or dawdle in setup on request, so the
launcher's deadlines, kills and reports are tested on any machine. It does no arithmetic.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=Path, required=True)
    parser.add_argument("--groups", default="two,one")
    parser.add_argument("--cases", type=int, default=3, help="cases per group")
    parser.add_argument("--hang-at", default="", help="case id at which every rank stops making progress")
    parser.add_argument("--hang-rank", type=int, default=-1, help="only this rank hangs (-1: all)")
    parser.add_argument("--crash-at", default="", help="case id at which rank 1 exits with status 3")
    parser.add_argument("--setup-sleep", type=float, default=0.0)
    parser.add_argument("--cannot-run", default="", help="a group every rank reports it cannot run")
    parser.add_argument("--skip-group", action="append", default=[])
    args = parser.parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    events = args.events.open("a", encoding="utf-8")

    def emit(**event: object) -> None:
        events.write(json.dumps(event) + "\n")
        events.flush()

    groups = [g for g in args.groups.split(",") if g not in args.skip_group]
    plan = [{"id": f"{g}/c{i}", "group": g, "label": f"{g} case {i}"} for g in groups for i in range(args.cases)]
    emit(event="plan", cases=plan)
    time.sleep(args.setup_sleep)
    for group in groups:
        emit(event="setup", group=group, what="workspace")
        can_run = group != args.cannot_run
        emit(event="group", group=group, can_run=can_run, reason="" if can_run else f"{group} is absent here")
        for case in (c for c in plan if c["group"] == group):
            emit(event="start", case=case["id"])
            started = time.time()
            if case["id"] == args.hang_at and args.hang_rank in (-1, rank):
                time.sleep(3600)  # what a rank spinning on a peer's flag looks like from outside
            if case["id"] == args.crash_at and rank == 1:
                print(f"rank {rank} crashes at {case['id']}", file=sys.stderr)
                return 3
            emit(
                event="result",
                case=case["id"],
                passed=can_run,
                skipped=not can_run,
                reason="" if can_run else f"{group} is absent here",
                started_at=started,
                ended_at=time.time(),
                world=world,
            )
        emit(event="evidence", group=group, calls={f"{group}_entry": args.cases})
    emit(event="done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
