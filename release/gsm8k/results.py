"""The smoke's evidence: report.json for machines, report.md for people."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from release.core.journal import write_atomic
from release.gsm8k.scoring import METRICS, MetricResult

SCHEMA = "vllm-fused-moe/gsm8k-smoke/1"


@dataclass
class RunResult:
    label: str  # "with-fix" | "without-fix"
    with_patches: bool
    fix_active: bool | None  # what the serving env's output_is_reduced() says; None if unreadable
    versions: dict[str, str | None]
    serve_argv: list[str]
    scorer: str  # "builtin" | "lm-eval"
    data: str
    metrics: dict[str, MetricResult]
    durations_s: dict[str, float]
    notes: list[str] = field(default_factory=list)
    samples_path: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "with_patches": self.with_patches,
            "fix_active": self.fix_active,
            "versions": self.versions,
            "serve_argv": self.serve_argv,
            "scorer": self.scorer,
            "data": self.data,
            "metrics": {name: result.as_dict() for name, result in self.metrics.items()},
            "durations_s": {name: round(value, 3) for name, value in self.durations_s.items()},
            "notes": self.notes,
            "samples_path": self.samples_path,
        }


@dataclass
class SmokeReport:
    model: str
    backend: str
    tensor_parallel_size: int
    data_parallel_size: int
    enable_expert_parallel: bool
    limit: int | None
    threshold: float
    gate_metric: str
    started_at: str
    runs: list[RunResult] = field(default_factory=list)
    duration_s: float = 0.0
    passed: bool = False
    verdict: str = ""

    def gated_run(self) -> RunResult:
        """The run the threshold applies to: the fixed one when comparing, else the only one."""
        fixed = [run for run in self.runs if run.with_patches]
        return fixed[0] if fixed else self.runs[0]

    def delta(self) -> dict[str, dict[str, float | None]] | None:
        fixed = [run for run in self.runs if run.with_patches]
        unfixed = [run for run in self.runs if not run.with_patches]
        if not fixed or not unfixed:
            return None
        result: dict[str, dict[str, float | None]] = {}
        for name in METRICS:
            after, before = fixed[0].metrics[name], unfixed[0].metrics[name]
            # Treats the two runs as independent samples: conservative for paired questions.
            stderr = (
                math.sqrt(after.stderr**2 + before.stderr**2)
                if after.stderr is not None and before.stderr is not None
                else None
            )
            result[name] = {"delta": after.value - before.value, "stderr": stderr}
        return result

    def as_dict(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "model": self.model,
            "backend": self.backend,
            "tensor_parallel_size": self.tensor_parallel_size,
            "data_parallel_size": self.data_parallel_size,
            "enable_expert_parallel": self.enable_expert_parallel,
            "num_fewshot": 5,
            "limit": self.limit,
            "threshold": self.threshold,
            "gate_metric": self.gate_metric,
            "runs": [run.as_dict() for run in self.runs],
            "delta": self.delta(),
            "passed": self.passed,
            "verdict": self.verdict,
        }


def _fmt_metric(result: MetricResult) -> str:
    stderr = f" ± {result.stderr:.4f}" if result.stderr is not None else ""
    return f"{result.value:.4f}{stderr}"


def _fmt_fix(run: RunResult) -> str:
    if run.fix_active is None:
        return "unknown (probe could not import the class)"
    return "yes" if run.fix_active else "no"


def render_markdown(report: SmokeReport) -> str:
    lines = [
        f"# GSM8K 5-shot smoke: {report.backend}",
        "",
        f"**{'PASS' if report.passed else 'FAIL'}** — {report.verdict}",
        "",
        "| | |",
        "| --- | --- |",
        f"| model | `{report.model}` |",
        f"| all2all backend | `{report.backend}` |",
        f"| parallelism | tp {report.tensor_parallel_size}, dp {report.data_parallel_size}, "
        f"expert parallel {'on' if report.enable_expert_parallel else 'off'} |",
        f"| questions | {'all' if report.limit is None else f'first {report.limit}'} of the test split |",
        f"| gate | {report.gate_metric} ≥ {report.threshold:.2f} on the {report.gated_run().label} run |",
        f"| started | {report.started_at} |",
        f"| duration | {report.duration_s:.0f} s |",
        "",
        "## Scores (exact match, ± standard error)",
        "",
        "| run | fix in wheel | fix active | strict-match | flexible-extract | n | scorer |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in report.runs:
        strict, flexible = run.metrics["strict-match"], run.metrics["flexible-extract"]
        lines.append(
            f"| {run.label} | {'yes' if run.with_patches else 'no'} | {_fmt_fix(run)} | {_fmt_metric(strict)} | "
            f"{_fmt_metric(flexible)} | {strict.n} | {run.scorer} |"
        )
    delta = report.delta()
    if delta is not None:
        lines += ["", "## Fix delta (with − without)", "", "| metric | delta | ± stderr |", "| --- | --- | --- |"]
        for name, values in delta.items():
            stderr = values["stderr"]
            lines.append(f"| {name} | {values['delta']:+.4f} | {'' if stderr is None else f'{stderr:.4f}'} |")
    lines += ["", "## Runs", ""]
    for run in report.runs:
        versions = ", ".join(f"{name} {version or 'not installed'}" for name, version in run.versions.items())
        lines += [
            f"### {run.label}",
            "",
            f"- versions: {versions}",
            f"- data: {run.data}",
            f"- server: `{' '.join(run.serve_argv)}`",
            "- durations: " + ", ".join(f"{name} {value:.1f} s" for name, value in run.durations_s.items()),
        ]
        if run.samples_path:
            lines.append(f"- per-question completions: `{run.samples_path}`")
        lines += [f"- note: {note}" for note in run.notes]
        lines.append("")
    return "\n".join(lines)


def write_report(report: SmokeReport, directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path, markdown_path = directory / "report.json", directory / "report.md"
    write_atomic(json_path, (json.dumps(report.as_dict(), indent=2) + "\n").encode("utf-8"))
    write_atomic(markdown_path, render_markdown(report).encode("utf-8"))
    return json_path, markdown_path
