"""`gsm8k`'s stage: run the smoke once per variant (without the fix, with it, or both), judge the gated
run against the threshold and write the report (release/gsm8k/cli.py validates the arguments, builds the
SmokeConfig and calls `run_gate`)."""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time
from dataclasses import dataclass
from types import FrameType

from release.core.errors import EXIT_BELOW_THRESHOLD, EXIT_INTERRUPTED, ReleaseError
from release.gsm8k.progress import note
from release.gsm8k.results import SmokeReport, write_report
from release.gsm8k.smoke import SmokeConfig, judge, run_once


@dataclass(frozen=True)
class GateOptions:
    """One `gsm8k` run: its config, the variants to run in order (True: with the fix) and when it started."""

    config: SmokeConfig
    variants: tuple[bool, ...]
    started_at: dt.datetime


class _Terminated(KeyboardInterrupt):
    """SIGTERM (CI cancelling the job) unwinds like Ctrl-C, so the server is stopped."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def run_gate(options: GateOptions) -> int:
    """Run each variant, judge, write the report; 0 when the gated run passes, EXIT_BELOW_THRESHOLD when not."""
    config = options.config
    report_dir = config.report_dir
    report_dir.mkdir(parents=True, exist_ok=True)
    report = SmokeReport(
        model=config.model,
        backend=config.backend,
        tensor_parallel_size=config.tensor_parallel_size,
        data_parallel_size=config.data_parallel_size,
        enable_expert_parallel=config.enable_expert_parallel,
        limit=config.limit,
        threshold=config.threshold,
        gate_metric=config.gate_metric,
        started_at=options.started_at.isoformat(timespec="seconds"),
    )
    clock = time.monotonic()
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    try:
        for with_patches in options.variants:
            report.runs.append(run_once(config, with_patches))
    except KeyboardInterrupt:
        note(f"interrupted; servers stopped; logs in {report_dir}")
        return EXIT_INTERRUPTED
    except ReleaseError:
        note(f"no report written; logs in {report_dir}")
        raise
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
    report.duration_s = time.monotonic() - clock
    judge(report)
    json_path, markdown_path = write_report(report, report_dir)
    note(f"{'PASS' if report.passed else 'FAIL'}: {report.verdict}")
    note(f"report: {markdown_path} and {json_path}")
    return 0 if report.passed else EXIT_BELOW_THRESHOLD
