"""The whole report: the facts gathered in this interpreter, judged; and the report in words."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from .attestation import verify_attestation
from .evidence import read_evidence, wheel_name
from .installed import compare_fixes, dist_version, find_scan, load_scan, overlay_state, public_version, release_facts
from .live import live_classes, live_target
from .reading import escaped, redacted
from .records import AttestationRead, EvidenceRead, Facts, Live, Overlay, Report, ScanRead, Serve
from .serve import serve_facts, serve_layout
from .verdict import conclude
from .words import INDEX_ENV, MODE_ENV, PROJECT, Status


def report(
    doctor: str,
    scan_path: Path | None = None,
    live: bool = False,
    serve: list[str] | None = None,
    index_url: str | None = None,
    env: Mapping[str, str] | None = None,
    evidence_key: str | None = None,
) -> Report:
    """The whole report. `doctor`: the doctor.py that writes it; `env`: the variables `vllm serve` would
    have beyond this process's own (--env)."""
    given = dict(env or {})
    index_url = index_url or os.environ.get(INDEX_ENV) or None
    vllm = dist_version("vllm")
    overlay = overlay_state()
    path, source = find_scan(scan_path, Path(overlay.location) if overlay.location else None)
    scan, problem = load_scan(path) if path else (None, "no scan data (affected-releases.json) found")
    release = release_facts(scan, problem, vllm)
    facts = Facts(
        doctor=doctor,
        python=sys.executable,
        vllm=vllm,
        flashinfer=dist_version("flashinfer-python"),
        scan=ScanRead(
            str(path) if path else None,
            source,
            problem,
            scan.scanned[0] if scan and scan.scanned else None,
            scan.newest_scanned if scan else None,
        ),
        release=release,
        overlay=compare_fixes(overlay, release),
        live=live_classes(overlay.location, *live_target(scan, release.line)) if live else None,
        serve=None
        if serve is None
        else serve_layout(
            serve,
            {**os.environ, **given},
            serve_facts(scan, release.line, public_version(vllm) if vllm else None),
            frozenset(given),
        ),
        # What publish proved of the installed wheel, where the index it came from is known.
        evidence=read_evidence(index_url, wheel_name(overlay.version), needs=release.needs)
        if index_url and overlay.installed and overlay.version
        else None,
        # Issue 47: its signed evidence, verified against the key the operator pins.
        attestation=verify_attestation(index_url, wheel_name(overlay.version), evidence_key)
        if index_url and overlay.installed and overlay.version
        else None,
    )
    # The fix is printed: the index without its credentials (pip takes them from netrc or a keyring).
    return conclude(facts, redacted(index_url) if index_url else None)


# ----------------------------------------------------------------------------- in words


def format_report(report: Report) -> str:
    facts, fix = report.facts, report.fix
    rows = [*head_rows(facts), *overlay_rows(facts.overlay)]
    if facts.live is not None:
        rows += live_rows(facts.live)
    if facts.serve is not None:
        rows += serve_rows(facts.serve)
    if facts.evidence is not None:
        rows += evidence_rows(facts.evidence)
    if facts.attestation is not None:
        rows += attestation_rows(facts.attestation)
    lines = ["vllm-fused-moe doctor", *(f"  {label:<18}{text}" for label, text in rows)]
    lines.append(f"verdict: {report.verdict.value} (exit {report.exit_code}): {report.summary}")
    if fix:
        lines.append(f"fix: {fix.command}" if fix.command else f"fix: {fix.why}")
        if fix.command:
            lines.append(f"     {fix.why}")
    # What came from an index, a URL, the scan data or an install is in these lines: each line is printed
    # with its control characters escaped, so none can end a line early, print a second verdict or colour it.
    return "\n".join(escaped(line) for line in lines)


Rows = list[tuple[str, str]]


def head_rows(facts: Facts) -> Rows:
    scan, release = facts.scan, facts.release
    rows = [
        ("python", facts.python),
        ("vLLM", facts.vllm or "not installed"),
        ("flashinfer-python", facts.flashinfer or "not installed"),
        (
            "scan data",
            f"{scan.path} ({scan.source.value}; {scan.oldest_scanned} .. {scan.newest_scanned})"
            if scan.path and not scan.problem
            else str(scan.problem),
        ),
        ("release", f"{'cannot tell' if release.status is Status.UNKNOWN else release.status.value}: {release.why}"),
    ]
    for bug, info in release.bugs.items():
        rows.append(("bug", f"{bug}: {info.status}" + (f" ({info.title})" if info.title else "")))
    if release.fixed_in:
        rows.append(("fixed upstream in", release.fixed_in))
    return rows


def overlay_rows(overlay: Overlay) -> Rows:
    if not overlay.installed:
        return [("overlay", f"{PROJECT} not installed" + (f": {overlay.reason}" if overlay.reason else ""))]
    rows = [("overlay", f"{PROJECT} {overlay.version} for vLLM {overlay.vllm_tag}, {overlay.location}")]
    if overlay.missing_fixes:
        rows.append(("overlay lacks", ", ".join(overlay.missing_fixes)))
    if overlay.activates:
        hook = "" if overlay.hook_installed else ", but its hook is not installed in this interpreter"
        warning = f"; warning: {overlay.reason}" if overlay.reason else ""
        rows.append(("activates here", f"yes ({MODE_ENV}={overlay.mode or 'on'}{hook}){warning}"))
    else:
        rows.append(("activates here", f"no: {overlay.reason}"))
    return rows


def live_rows(live: Live) -> Rows:
    rows = [("live", f"importing {live.module} failed: {live.error}")] if live.error else []
    for name, cls in live.classes.items():
        if not cls.found:
            rows.append(("live", f"{name}: not in {live.module}"))
            continue
        served = "our overlay" if cls.served_by_overlay else "vLLM"
        rows.append(("live", f"{name}.output_is_reduced() = {cls.output_is_reduced}, from {served}"))
        rows.append(("", str(cls.file)))
    rows.append(("live import", f"{live.seconds:.2f} s"))
    return rows


def serve_rows(serve: Serve) -> Rows:
    rows = [("command line", f"refused: {serve.refused}" if serve.refused else serve.why)]
    for name, item in sorted(serve.environment.items()):
        rows.append(("serve environment", f"{name}={item.value} (from {item.source})"))
    return rows + [("note", note) for note in serve.notes]


def evidence_rows(evidence: EvidenceRead) -> Rows:
    if not evidence.found:
        return [("evidence", f"{evidence.url}: {evidence.problem}")]
    bugs = "; ".join(f"{b.bug}: {b.verdict}" for b in evidence.bugs) or "no bug to prove"
    rows = [("evidence", f"{evidence.wheel} on vLLM {evidence.vllm_tag} (line {evidence.line}): {bugs}")]
    if evidence.problem:  # read, but it does not prove the fix of the wheel installed here
        rows.append(("evidence problem", evidence.problem))
    return rows


def attestation_rows(read: AttestationRead) -> Rows:
    if read.status == "verified":
        return [("signed evidence", f"verified: {read.subject} sha256 {read.subject_sha256} {read.result}, "
                 f"signed by {read.verified_by} (pinned by {read.pinned_from})")]  # fmt: skip
    return [("signed evidence", f"{read.status}: {read.problem} ({read.url})")]
