"""The scan's outputs: affected-releases.json (shipped in the wheel; doctor reads it) and its Markdown form.

The JSON's keys are a contract (docs/affected-releases.schema.json, schema 1): doctor reads
`releases[<version>].status`, `bugs`, `in_train` and `line`, `fixed_in`, `bugs` (per bug: its
title, its patches, where upstream fixed it) and per line `live`, `builds` and `serve` (how the
line's releases read a `vllm serve` command line). Status is per bug; a release's `status` is
the worst of its bugs' (a downstream patch never makes it `affected`). No timestamps: the same
scan gives the same bytes, so the overlay wheel stays reproducible.

A scan of a range (--since/--until) updates that range and keeps the releases outside it from
the previous document, as long as they were classified for the same patches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from release.core.errors import ConfigError
from release.core.versions import Pep440Version
from release.model.outcome import PatchStatus, ReleaseStatus
from release.model.patch import Patch
from release.model.scan import SCAN_SCHEMA, read_scan
from release.scan.run import ScanOptions, ScanResult, bug_map, bug_statuses, in_range, release_status
from release.scan.serve import read_serve

GENERATED_BY = "python -m release scan"
# What a scan's read of a wheel proves (release/pristine/wheel.py): said in both outputs, so that no one
# takes a scan's `wheel_sha256` for a verified identity.
READ = (
    "lazy: each wheel by HTTP range requests (or from the cache), every member used checked against the "
    "sha256 its wheel's own RECORD lists. A lazy read proves membership, not identity: wheel_sha256 is the "
    "index's sha256 of the whole file, not verified on its bytes; rebase and train add verify it on a whole "
    "download before they record or vendor anything"
)


def load_document(path: Path) -> dict[str, Any] | None:
    return read_scan(path, error=ConfigError)  # release/model/scan.py: the one reader


def build_document(
    result: ScanResult, options: ScanOptions, previous: dict[str, Any] | None, train: set[Pep440Version]
) -> tuple[dict[str, Any], list[str]]:
    """The new document, and the versions dropped from the previous one (classified for other patches)."""
    names = [p.name for p in result.patches]
    releases: dict[str, dict[str, Any]] = {}
    dropped = []
    skipped: dict[str, str] = {}
    if previous:
        for version, entry in (previous.get("releases") or {}).items():
            if in_range(Pep440Version(version), options):
                continue  # rescanned now (or gone from the index)
            if sorted((entry.get("patches") or {}).keys()) != sorted(names):
                dropped.append(version)
                continue
            releases[version] = dict(entry)
        skipped = {
            v: why for v, why in (previous.get("skipped") or {}).items() if not in_range(Pep440Version(v), options)
        }
    for r in result.results:
        releases[r.version] = {
            "status": r.status,
            "bugs": dict(r.bugs),
            "line": r.line,
            "patches": dict(r.patches),
            "in_train": False,
            "wheel": r.wheel,
            "wheel_sha256": r.wheel_sha256,
            "flashinfer": r.flashinfer,
        }
        if r.proven:
            releases[r.version]["proven_skips"] = list(r.proven)
    skipped |= result.skipped
    ordered = sorted(releases, key=Pep440Version)
    bug_of = bug_map(result.patches)
    for version in ordered:
        entry = releases[version]
        entry["bugs"] = bug_statuses(entry["patches"], bug_of, entry.get("proven_skips") or ())
        entry["status"] = release_status(entry["bugs"])
        entry["in_train"] = Pep440Version(version) in train
        releases[version] = {key: entry[key] for key in RELEASE_KEYS if key in entry}
    document = {
        "schema": SCAN_SCHEMA,
        "generated_by": GENERATED_BY,
        "read": READ,
        "scanned": ordered,
        "newest_scanned": ordered[-1] if ordered else None,
        "fixed_in": fixed_in(ordered, releases),
        "bugs": bugs_of(result.patches, ordered, releases),
        "patches": {
            p.name: {
                "subject": p.subject,
                "purpose": "bug" if p.purpose.bug else "downstream",
                "bug": p.purpose.bug or None,
                "title": p.purpose.title,
                "first_upstream": first_upstream(p, ordered, releases),
            }
            for p in result.patches
        },
        "releases": {version: releases[version] for version in ordered},
        "skipped": {v: skipped[v] for v in sorted(skipped, key=Pep440Version)},
    }
    if result.lines is not None:
        serve = read_serve(options.layout.lines, result.lines)
        document["lines"] = {
            line.name: {
                "modules": list(line.modules),
                "note": line.note,
                "fires": line.fires,
                "live": {"module": line.live_module, "classes": list(line.live_classes)},
                "backends": list(line.backends),
                "builds": dict(serve[line.name].builds),
                "serve": [r.to_json() for r in serve[line.name].ranges],
            }
            for line in result.lines.lines
        }
        document["left_out"] = [{"releases": o.releases, "reason": o.reason} for o in result.lines.left_out]
    return document, dropped


# The order of a release's keys in the document (the schema's `release`).
RELEASE_KEYS = ("status", "bugs", "line", "patches", "proven_skips", "in_train", "wheel", "wheel_sha256", "flashinfer")


def first_upstream(patch: Patch, ordered: list[str], releases: dict[str, dict[str, Any]]) -> str | None:
    """The first release with the patch's change: its `Applied-Upstream:` (what rebase recorded when it retired
    it), else the oldest scanned release where the classifier finds it upstream."""
    recorded = patch.applied_upstream
    if recorded is not None:
        return recorded.removeprefix("v")
    return next((v for v in ordered if releases[v]["patches"].get(patch.name) == PatchStatus.UPSTREAM), None)


def bugs_of(patches: list[Patch], ordered: list[str], releases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per bug: its title, its patches, the first release with any of their changes, and `fixed_in`."""
    out: dict[str, Any] = {}
    for patch in patches:
        bug = patch.purpose.bug
        if not bug:
            continue
        info = out.setdefault(bug, {"title": patch.purpose.title, "patches": [], "first_fixed": None})
        info["patches"].append(patch.name)
        first = first_upstream(patch, ordered, releases)
        if first is not None and (
            info["first_fixed"] is None or Pep440Version(first) < Pep440Version(info["first_fixed"])
        ):
            info["first_fixed"] = first
    for bug, info in out.items():
        info["fixed_in"] = fixed_in(ordered, releases, bug)
    return out


def fixed_in(ordered: list[str], releases: dict[str, dict[str, Any]], bug: str | None = None) -> str | None:
    """The oldest `fixed` release after which no release is `affected` again (by `bug`, or by any)."""
    candidate = None
    for version in ordered:
        entry = releases[version]
        status = entry["status"] if bug is None else entry["bugs"].get(bug, ReleaseStatus.NOT_AFFECTED)
        if status == ReleaseStatus.AFFECTED:
            candidate = None
        elif status == ReleaseStatus.FIXED and candidate is None:
            candidate = version
    return candidate


def no_overlay_needed(document: dict[str, Any]) -> str:
    """Which vLLM releases need no overlay of ours, in one sentence from the data: the releases from the one
    that has every bug's fix upstream (`fixed_in`, over all bugs), or none yet. README.md and docs/overlay.md
    say it in these very words (tests/hygiene/test_doc_facts.py), so a second bug that outlives the first fix
    cannot leave them saying the first one's range."""
    fixed = document.get("fixed_in")
    if fixed:
        return f"vLLM {fixed} and later have every fix upstream and need no overlay."
    return "No vLLM release has every fix upstream yet: each affected release needs its overlay."


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"


# ------------------------------------------------------------------ Markdown

STATUS_TEXT = {
    ReleaseStatus.AFFECTED: "**affected**",
    ReleaseStatus.FIXED: "fixed upstream",
    ReleaseStatus.NOT_AFFECTED: "not affected",
}


def to_markdown(document: dict[str, Any]) -> str:
    releases = document["releases"]
    patches = document["patches"]
    affected = [v for v, e in releases.items() if e["status"] == ReleaseStatus.AFFECTED]
    covered = [v for v in affected if releases[v]["in_train"]]
    uncovered = [v for v in affected if not releases[v]["in_train"]]
    downstream = [v for v, e in releases.items() if e["in_train"] and e["status"] != ReleaseStatus.AFFECTED]
    bugs = document.get("bugs") or {}
    out = [
        "# Affected vLLM releases",
        "",
        f"Written by `{document['generated_by']}` (do not edit by hand): every final vLLM release on the",
        "package index, each patch of `patches/series` and `patches/retired/` classified on that",
        "release's own modules with the classifier `rebase` uses. The same data ships in the overlay",
        "wheel as `vllm_fused_moe/affected-releases.json` (schema: `docs/affected-releases.schema.json`).",
        "",
        "- Status is per bug. **affected**: the bug's patch applies (the bug is there); **fixed upstream**: its",
        "  change is in the release; **not affected**: the code it changes is not there (`absent`). A release's",
        "  status is its worst bug's. A downstream patch (no bug behind it) is listed, never makes a release",
        "  affected; `skipped`: the release's line does without that patch (its series says why). A skipped",
        "  bug patch leaves the release **affected** unless the bug's test proves the skip, passing cleanly on",
        "  that release (`python -m release evidence`): `skipped, proven`, and the release is **not affected** by it.",
        "- **train**: we ship an overlay for it (`patches/train.toml`): for a bug, or with downstream changes",
        "  only (optional for its users).",
        "- **read**: " + str(document.get("read") or READ).replace("wheel_sha256", "`wheel_sha256`") + ".",
        "",
        f"Scanned {len(releases)} releases, {document['scanned'][0] if releases else '-'} to "
        f"{document['newest_scanned'] or '-'}. Affected: {', '.join(affected) or 'none'}.",
        f"Fixed upstream from: {document['fixed_in'] or 'not yet'}. {no_overlay_needed(document)}",
        f"Affected and covered by the train: {', '.join(covered) or 'none'}; "
        f"affected without an overlay: {', '.join(uncovered) or 'none'}.",
        f"In the train for downstream changes only: {', '.join(downstream) or 'none'}.",
        "",
        "| bug | title | patches | first fixed upstream in | fixed upstream from |",
        "| --- | --- | --- | --- | --- |",
    ]
    for bug, info in bugs.items():
        listed = ", ".join(name.split("-", 1)[0] for name in info["patches"])
        out.append(
            f"| {bug} | {info['title']} | {listed} | {info['first_fixed'] or '-'} | {info['fixed_in'] or 'not yet'} |"
        )
    out += ["", "| patch | subject | for | first upstream in |", "| --- | --- | --- | --- |"]
    for name, info in patches.items():
        purpose = f"bug {info['bug']}" if info.get("bug") else f"downstream: {info.get('title') or '-'}"
        out.append(f"| `{name}` | {info['subject']} | {purpose} | {info['first_upstream'] or '-'} |")
    numbers = {name: name.split("-", 1)[0] for name in patches}
    out += [
        "",
        "| release | status | line | " + " | ".join(numbers.values()) + " | train | FlashInfer pin | wheel |",
        "| --- | --- | --- | " + " | ".join("---" for _ in numbers) + " | --- | --- | --- |",
    ]
    for version in reversed(document["scanned"]):
        e = releases[version]
        proven = set(e.get("proven_skips") or ())
        cells = " | ".join(e["patches"].get(name, "-") + (", proven" if name in proven else "") for name in numbers)
        train = "-" if not e["in_train"] else "yes" if e["status"] == ReleaseStatus.AFFECTED else "downstream only"
        out.append(
            f"| {version} | {STATUS_TEXT[e['status']]} | {e['line'] or '-'} | {cells} | "
            f"{train} | {e['flashinfer'] or '-'} | `{e['wheel']}` |"
        )
    out += lines_markdown(document)
    skipped = document.get("skipped") or {}
    by_reason: dict[str, list[str]] = {}
    for version, why in skipped.items():
        by_reason.setdefault(why, []).append(version)
    for why, versions in by_reason.items():
        out += ["", f"Not read ({why}): {', '.join(versions)}."]
    return "\n".join(out) + "\n"


def lines_markdown(document: dict[str, Any]) -> list[str]:
    """Per release line: its releases, where the code lives, when the bug bites, and who is left out."""
    lines = document.get("lines") or {}
    if not lines:
        return []
    releases = document["releases"]
    fixed = document["fixed_in"] or "not yet"
    out = ["", "## Release lines", "", f"Every line is fixed upstream from {fixed} on (the first fixed release).", ""]
    out += ["| line | affected releases | in the train | where the code lives | when the double reduce happens |"]
    out += ["| --- | --- | --- | --- | --- |"]
    for name, info in lines.items():
        on = [v for v, e in releases.items() if e["line"] == name and e["status"] == ReleaseStatus.AFFECTED]
        train = [v for v in on if releases[v]["in_train"]]
        span = f"{on[0]} - {on[-1]} ({len(on)})" if on else "-"
        out.append(f"| `{name}` | {span} | {len(train)} of {len(on)} | {info['note']} | {info.get('fires') or '-'} |")
    out += serve_markdown(lines)
    left = document.get("left_out") or []
    if left:
        out += ["", "Left out of the train (no flag can fix them):", ""]
        out += [f"- vLLM {item['releases'].lstrip('=')}: {item['reason']}." for item in left]
    return out


def serve_markdown(lines: dict[str, Any]) -> list[str]:
    """Per range of releases: what `vllm serve` accepts and when it takes the DP-chunked path (the doctor reads it)."""
    rows = [(name, r) for name, info in lines.items() for r in info.get("serve") or []]
    if not rows:
        return []
    out = [
        "",
        "How each range of releases reads a `vllm serve` command line (`[[line.serve]]` of patches/lines.toml;",
        "`vllm-fused-moe doctor -- ARGS` decides with it, docs/doctor.md):",
        "",
        "| releases | line | `--all2all-backend` accepts | `VLLM_ALL2ALL_BACKEND` | DP-chunked path |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, r in rows:
        if not r["dp_chunked"]:
            chunked = "none"
        elif r["dp_chunk_env"]:
            chunked = f"{', '.join(r['dp_chunked'])} unless `{r['dp_chunk_env']}=0`"
        else:
            chunked = f"{', '.join(r['dp_chunked'])}, always"
        out.append(
            f"| {r['releases']} | `{name}` | {', '.join(r['all2all_backends'])} | {r['backend_env']} | {chunked} |"
        )
    return out
