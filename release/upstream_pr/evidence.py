"""The test evidence PR.md quotes: our newest contract, kernel and GSM8K reports.

Only what a report file says is quoted, with its path; a missing report is written as
"not run" next to the command that produces it. Nothing is ever summarised from memory.

Where reports are looked for (under --reports, default reports/):
- contract: contract/**/*.json or contract/**/*.xml (pytest --junitxml)
- kernel:   kernel/**/*.json or kernel/**/*.xml
- GSM8K:    gsm8k/*/report.json (schema vllm-fused-moe/gsm8k-smoke/1), newest per backend
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from release.core.errors import BadInputError
from release.core.parse import load_json

GSM8K_SCHEMA = "vllm-fused-moe/gsm8k-smoke/1"
GSM8K_MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
BACKENDS = ("flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided")

CONTRACT_COMMAND = "nox -s test -- tests/contract --junitxml=reports/contract/junit.xml"
KERNEL_COMMAND = "nox -s kernel -- --junitxml=reports/kernel/junit.xml"


def gsm8k_command(backend: str) -> str:
    return f"nox -s gsm8k -- --model {GSM8K_MODEL} --backend {backend} --compare"


@dataclass
class Evidence:
    """One kind of test result: what was found (lines to quote) or how to produce it."""

    title: str
    commands: list[str]
    found: list[str] = field(default_factory=list)  # Markdown lines quoted from reports
    sources: list[str] = field(default_factory=list)  # report paths, relative to the checkout

    @property
    def ran(self) -> bool:
        return bool(self.sources)


def _newest(paths: list[Path]) -> Path | None:
    return max(paths, key=lambda p: (p.stat().st_mtime, str(p))) if paths else None


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def summarize_file(path: Path) -> list[str]:
    """What a generic test report says about itself, quoted; [] when it says nothing we can read."""
    if path.suffix == ".xml":
        return _summarize_junit(path)
    try:
        data = load_json(path)
    except BadInputError:
        return [f"unreadable report: `{path.name}`"]
    if isinstance(data, list):
        cases = [case for case in data if isinstance(case, dict) and "passed" in case]
        if cases:
            failed = sum(1 for case in cases if not case["passed"])
            return [f"{len(cases) - failed} passed, {failed} failed (cases in `{path.name}`)"]
        return []
    if not isinstance(data, dict):
        return []
    lines = []
    for key in ("passed", "result", "verdict", "outcome", "summary", "started_at", "versions"):
        if key in data:
            lines.append(f"{key}: `{json.dumps(data[key], sort_keys=True)}`")
    return lines


def _summarize_junit(path: Path) -> list[str]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return [f"unreadable report: `{path.name}`"]
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in totals:
            totals[key] += int(suite.get(key, "0") or 0)
    passed = totals["tests"] - totals["failures"] - totals["errors"] - totals["skipped"]
    stamp = suites[0].get("timestamp", "") if suites else ""
    return [
        f"{passed} passed, {totals['failures']} failed, {totals['errors']} errors, {totals['skipped']} skipped"
        + (f" (pytest, {stamp})" if stamp else " (pytest)")
    ]


def _generic(title: str, command: str, directory: Path, root: Path) -> Evidence:
    evidence = Evidence(title, [command])
    candidates = (
        [p for p in directory.rglob("*") if p.suffix in (".json", ".xml") and p.is_file()] if directory.is_dir() else []
    )
    newest = _newest(candidates)
    if newest is not None:
        evidence.sources.append(_rel(newest, root))
        evidence.found += summarize_file(newest) or [f"see `{_rel(newest, root)}`"]
    return evidence


def contract_evidence(reports: Path, root: Path) -> Evidence:
    return _generic("Reduce contract (CPU)", CONTRACT_COMMAND, reports / "contract", root)


def kernel_evidence(reports: Path, root: Path) -> Evidence:
    return _generic("FlashInfer kernel contract (GPU)", KERNEL_COMMAND, reports / "kernel", root)


def _metric(metric: dict[str, Any]) -> str:
    value, stderr = metric.get("value"), metric.get("stderr")
    if not isinstance(value, (int, float)):
        return "?"
    return f"{value:.4f}" + (f" ± {stderr:.4f}" if isinstance(stderr, (int, float)) else "")


def gsm8k_evidence(reports: Path, root: Path) -> Evidence:
    evidence = Evidence("GSM8K 5-shot, with and without the fix", [gsm8k_command(b) for b in BACKENDS])
    # A report is JSON we did not write in this process: any value may be anything.
    newest: dict[str, tuple[str, Path, dict[str, Any]]] = {}
    for path in (reports / "gsm8k").glob("*/report.json") if (reports / "gsm8k").is_dir() else []:
        try:
            data = load_json(path)
        except BadInputError:
            continue
        if not isinstance(data, dict) or data.get("schema") != GSM8K_SCHEMA:
            continue
        backend, started = str(data.get("backend", "?")), str(data.get("started_at", ""))
        if backend not in newest or started > newest[backend][0]:
            newest[backend] = (started, path, data)
    if not newest:
        return evidence
    evidence.found += [
        "| backend | run | strict-match | flexible-extract | n | gate | report |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for backend in sorted(newest):
        _, path, data = newest[backend]
        rel = _rel(path, root)
        evidence.sources.append(rel)
        verdict = "PASS" if data.get("passed") else "FAIL"
        gate = f"{verdict} ({data.get('gate_metric', '?')} ≥ {data.get('threshold', '?')})"
        for run in data.get("runs", []):
            metrics = run.get("metrics", {})
            strict, flexible = metrics.get("strict-match", {}), metrics.get("flexible-extract", {})
            evidence.found.append(
                f"| `{backend}` | {run.get('label', '?')} | {_metric(strict)} | {_metric(flexible)} | "
                f"{strict.get('n', '?')} | {gate} | `{rel}` |"
            )
    setups = {
        (d.get("model"), d.get("tensor_parallel_size"), d.get("data_parallel_size"), d.get("enable_expert_parallel"))
        for _, _, d in newest.values()
    }
    for model, tp, dp, ep in sorted(setups, key=str):
        evidence.found.append(f"\nModel `{model}`, tp {tp}, dp {dp}, expert parallel {'on' if ep else 'off'}.")
    return evidence


def collect(reports: Path, root: Path) -> list[Evidence]:
    return [contract_evidence(reports, root), kernel_evidence(reports, root), gsm8k_evidence(reports, root)]
