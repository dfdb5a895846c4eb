"""`scan`'s job: which releases on the index carry the bugs our patches fix (rebase/run.py moves the head).

The job, step by step: list every final release on the package index (build-tagged wheels
and post releases included, pre-releases left out); for each, read only the modules of our
release lines out of its wheel (range requests, or the cache); put it on a line; then
classify each patch (the series, its retired ones in their places) exactly as `rebase` does
(`classify` in release/queue/upstreamed.py: `git apply`, reverse apply, the semantic check, `git am
--3way`) on a scratch repository holding that release's modules; and finally merge the
result into the document we ship (release/overlay/runtime/vllm_fused_moe/affected-releases.json,
beside the doctor) and its human form (docs/affected-releases.md).

Status is per bug: a release is affected by a bug where that bug's patch (the `Bug:` of its message;
on an older line, the line's variant in its place) applies or conflicts, or where its line skips it
with no proof; fixed where it is upstream; a downstream patch (`Downstream:`, no bug behind it) is
classified like any other and never makes a release affected. A line's skip of a bug's patch is
proven on a release by a clean pass of the bug's test there (`python -m release evidence`, kept where
release/queue/skip_proof.py reads it for `check` and `train add`): the scan reads the same proof, so
a proven skip leaves the release not affected by that bug, as `check` and `build --all` hold it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from release.core import log
from release.core.errors import MissingUpstreamTestError, ReleaseError, UnknownTagError
from release.core.files import present
from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.core.versions import Pep440Version, canonical_tag, version_of_tag
from release.model.lines import Line, Lines
from release.model.outcome import PatchStatus, ReleaseStatus
from release.model.patch import Patch
from release.model.series import EntryKind
from release.pristine import safe
from release.pristine.index import Release, index_url, releases, sdist_only
from release.pristine.lazy_wheel import Transfer
from release.pristine.wheel import pypi_content
from release.queue.load import Queue, entry_patch, is_head
from release.queue.replay import start, unapply
from release.queue.skip_proof import skipped_bug_tests, unproven_skips
from release.queue.snapshot import Checkout
from release.queue.upstreamed import classify
from release.train.replay import line_made_on


@dataclass(frozen=True)
class ScanOptions:
    """What `scan` reads (the releases from `since` to `until` on the index) and what it does with the
    document (update.py): write it unless `dry_run`, and print a summary, the `markdown` table or the `json`."""

    layout: Layout
    since: Pep440Version | None = None
    until: Pep440Version | None = None
    dry_run: bool = False
    shown: Literal["summary", "markdown", "json"] = "summary"


@dataclass
class ReleaseResult:
    version: str
    line: str | None
    patches: dict[str, PatchStatus]
    wheel: str
    wheel_sha256: str
    flashinfer: str
    how: str = ""
    transfer: Transfer = field(default_factory=Transfer)
    seconds: float = 0.0
    bugs: dict[str, ReleaseStatus] = field(default_factory=dict)  # per bug id, from its patches' statuses
    proven: list[str] = field(default_factory=list)  # the skipped bug patches whose skip a proof stands for here

    @property
    def status(self) -> ReleaseStatus:
        return release_status(self.bugs)


@dataclass
class ScanResult:
    results: list[ReleaseResult]
    skipped: dict[str, str]  # version -> why it was not read
    patches: list[Patch]
    seconds: float
    lines: Lines | None = None  # patches/lines.toml, for the document's `lines` and `left_out`

    @property
    def transfer(self) -> Transfer:
        total = Transfer()
        for result in self.results:
            total.add(result.transfer)
        return total


def bug_status(states: list[str]) -> ReleaseStatus:
    """One bug on one release, from the statuses of its patches there: affected where one applies (or would,
    once a variant resolves its conflict), and where the release's line skips it: a skip is a claim that
    only the bug's test can prove (`evidence`, release/evidence), never a finding of the scan (a proven
    skip is left out of `states`: bug_statuses); fixed where upstream has it; not-affected: its code is
    not there."""
    found = {PatchStatus(state) for state in states}
    if found & {PatchStatus.APPLIES, PatchStatus.CONFLICT, PatchStatus.SKIPPED}:
        return ReleaseStatus.AFFECTED
    if PatchStatus.UPSTREAM in found:
        return ReleaseStatus.FIXED
    return ReleaseStatus.NOT_AFFECTED


def bug_statuses(
    patches: Mapping[str, str], bug_of: Mapping[str, str], proven: Collection[str] = ()
) -> dict[str, ReleaseStatus]:
    """{bug id: status} of one release, from `patches` ({name: status}, maybe from a previous document)
    and `bug_of` ({patch name: its bug id}; a downstream patch is not in it). `proven`: the patches whose
    skip a clean pass of the bug's test on this release proves (proven_skips): the release does without
    that bug there, so the skip counts as the bug's code not being there."""
    bugs = dict.fromkeys(bug_of.values())
    kept = {n: s for n, s in patches.items() if not (s == PatchStatus.SKIPPED and n in proven)}
    return {bug: bug_status([s for n, s in kept.items() if bug_of.get(n) == bug]) for bug in bugs}


def release_status(bugs: Mapping[str, str]) -> ReleaseStatus:
    """A release for all our bugs: affected by any, else fixed where upstream has one, else not-affected."""
    found = {ReleaseStatus(state) for state in bugs.values()}
    if ReleaseStatus.AFFECTED in found:
        return ReleaseStatus.AFFECTED
    if ReleaseStatus.FIXED in found:
        return ReleaseStatus.FIXED
    return ReleaseStatus.NOT_AFFECTED


def bug_map(patches: list[Patch]) -> dict[str, str]:
    """{patch name: the id of the bug it fixes}; downstream patches left out."""
    return {p.name: p.purpose.bug for p in patches if p.purpose.bug}


def scan_patches(checkout: Checkout) -> tuple[Queue, list[Patch]]:
    """The series in order, its retired patches in their places (a retired patch still says who was affected),
    any other file of patches/retired/ first."""
    layout, queue = checkout.layout, checkout.queue
    head = next(line for line in checkout.lines.lines if is_head(layout, line))
    ordered = [p for e in queue.series.entries if (p := entry_patch(layout, head, e, checkout.patch)) is not None]
    names = {p.name for p in ordered}
    paths = sorted(layout.retired.glob("*.patch")) if layout.retired.is_dir() else []
    retired = [checkout.patch(path) for path in paths]
    return queue, [*[p for p in retired if p.name not in names], *ordered]


def in_range(version: Pep440Version, options: ScanOptions) -> bool:
    return (options.since is None or version >= options.since) and (options.until is None or version <= options.until)


def scan(options: ScanOptions, checkout: Checkout) -> ScanResult:
    """Scan the releases `options` names against `checkout` (the command's one read of the queue, the lines
    and the train: each line's series as first asked for is what every release's proofs read)."""
    started = time.monotonic()
    layout = options.layout
    queue, patches = scan_patches(checkout)
    lines = list(checkout.lines.lines)
    # An older line's series: each of its patches stands in for the common patch it varies.
    variants = {line.name: line_variants(checkout, line, patches) for line in lines if not is_head(layout, line)}
    # The pinned pristine tree goes into each scratch repository first, as in rebase, so that
    # `git am --3way` finds each patch's pre-image blobs.
    pinned_pristine, _ = unapply(layout.vendor_files(), queue.patches)
    made_on = lines_made_on(checkout, lines)
    base = index_url()
    listed = [r for r in releases(base) if in_range(r.version, options)]
    skipped = {v: "no wheel on the index (sdist only)" for v in sdist_only(base) if in_range(Pep440Version(v), options)}
    skipped |= {str(r.version): r.why_none for r in listed if r.wheel is None}
    todo = [r for r in listed if r.wheel is not None]
    log.note(f"scanning {len(todo)} vLLM release(s) on {base} for {len(patches)} patch(es)")
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-scan-") as tmp:
        for number, release in enumerate(todo, 1):
            result = scan_release(
                release, lines, patches, pinned_pristine, Path(tmp), variants, made_on, checkout=checkout
            )
            results.append(result)
            log.note(progress_line(number, len(todo), result))
    return ScanResult(results, skipped, patches, time.monotonic() - started, checkout.lines)


def line_variants(checkout: Checkout, line: Line, patches: list[Patch]) -> dict[str, Patch | None]:
    """{common patch name: the patch this line applies in its place (a variant, or the patch itself), or
    None where the line skips it}."""
    known = {p.name for p in patches}
    out: dict[str, Patch | None] = {}
    for entry, patch in checkout.entries(line):
        if patch is None:
            out[entry.name] = None
            continue
        common = patch.varies if entry.kind == EntryKind.PATCH else patch.name
        out[common if common in known else patch.name] = patch
    return out


def lines_made_on(checkout: Checkout, lines: list[Line]) -> dict[str, dict[str, bytes]]:
    """Each older line's newest train tag's modules, where `pq carry` makes the line's variants: the tree
    whose blobs (with the line's series on it) a variant stacked on another merges 3-way from. A line
    whose tag cannot be read here (no train, an index that does not have it) goes without them."""
    if not present(checkout.layout.train):
        return {}
    train = checkout.require_train()
    out = {}
    for line in lines:
        if is_head(checkout.layout, line):
            continue
        try:
            files = line_made_on(train, line, "")
        except ReleaseError:
            continue
        if files:
            out[line.name] = files
    return out


def scan_release(
    release: Release,
    lines: list[Line],
    patches: list[Patch],
    pinned: dict[str, bytes],
    tmp: Path,
    variants: dict[str, dict[str, Patch | None]] | None = None,
    made_on: dict[str, dict[str, bytes]] | None = None,
    *,
    checkout: Checkout,
) -> ReleaseResult:
    started = time.monotonic()
    version = str(release.version)
    content = pypi_content(version, lambda name: any(line.wants(name) for line in lines))
    metadata = safe.prove_wheel_release(content.metadata_raw, version, content.wheel)
    line = next((line for line in lines if line.present(content.names, content.files)), None)
    own = (variants or {}).get(line.name) if line else None
    if line is None or own is None:
        # The head line (or none): the series and the retired patches, on the prepare_finalize/ subtree.
        prefix = UPSTREAM_SUBTREE + "/"
        subtree = {n[len(prefix) :]: d for n, d in content.files.items() if n.startswith(prefix)}
        states = classify_patches(patches, subtree if line else {}, pinned, tmp / version)
    else:
        # An older line: each common patch is judged by the variant the line takes in its place.
        taken = [variant for variant in own.values() if variant is not None]
        seed = (made_on or {}).get(line.name, {})
        found = classify_patches(taken, line.relative(content.files), seed, tmp / version, line.root)
        states = {}
        for p in patches:
            variant = own.get(p.name, p)
            states[p.name] = PatchStatus.SKIPPED if variant is None else found.get(variant.name, PatchStatus.ABSENT)
    skips = [name for name, state in states.items() if state == PatchStatus.SKIPPED]
    proven = proven_skips(checkout, line.name, version, content.wheel_sha256) if line and skips else []
    return ReleaseResult(
        version=version,
        line=line.name if line else None,
        patches=states,
        wheel=content.wheel,
        wheel_sha256=content.wheel_sha256,
        flashinfer=safe.wheel_flashinfer_pin(metadata, content.wheel),
        how=content.how,
        transfer=content.transfer,
        seconds=time.monotonic() - started,
        bugs=bug_statuses(states, bug_map(patches), proven),
        proven=proven,
    )


def proven_skips(checkout: Checkout, line: str, version: str, wheel_sha256: str) -> list[str]:
    """The bug patches `line` skips whose skip a clean pass of the bug's test proves on release `version`, read
    from the wheel with the index's `wheel_sha256` (release/queue/skip_proof.py: the proof `check` and `train add`
    read, which `python -m release evidence` writes). A release no tag names (a four-part version), or a skipped
    bug patch that names no test, has no proof: its skip stays a claim and the release affected (`check` names
    the missing test)."""
    try:
        tag = canonical_tag(version)
        tests = skipped_bug_tests(checkout, line)
    except (UnknownTagError, MissingUpstreamTestError):
        return []
    unproven = {u.test.patch for u in unproven_skips(checkout, tag, line, wheel_sha256)}
    return sorted({test.patch for test in tests} - unproven)


def existing_files(patch: Patch, root: str = UPSTREAM_SUBTREE) -> list[str]:
    """The files a patch changes that must exist before it (not the ones it creates), relative to `root`."""
    cut = len(root) + 1
    created = {h.path for h in patch.hunks if h.header.startswith("@@ -0,0 ")}
    return [path[cut:] for path in patch.files if path not in created]


def classify_patches(
    patches: list[Patch], files: dict[str, bytes], pinned: dict[str, bytes], work: Path, root: str = UPSTREAM_SUBTREE
) -> dict[str, PatchStatus]:
    """Each patch on one release's files (keyed below `root`), in order, with rebase's classifier."""
    states: dict[str, PatchStatus] = {}
    present = [p for p in patches if files and any(f in files for f in existing_files(p, root))]
    for patch in patches:
        if patch not in present:
            states[patch.name] = PatchStatus.ABSENT
    if not present:
        return states
    repo = WorkRepo.create(work, root)
    try:
        # The pinned tree with the series on it first: its blobs are the bases of the patches' 3-way merges.
        start(repo, work, files, "release pristine", pinned, patches)
        for patch in present:
            decided = classify(repo, patch, work / ".patches")
            if decided.status == PatchStatus.CONFLICT:
                repo.run("am", "--abort", check=False)
            states[patch.name] = decided.status
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {p.name: states[p.name] for p in patches}


# ---------------------------------------------------------------- reporting


def human_bytes(count: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def progress_line(number: int, total: int, result: ReleaseResult) -> str:
    width = len(str(total))
    states = ", ".join(f"{name[:4]} {state}" for name, state in result.patches.items())
    moved = human_bytes(result.transfer.bytes) + (
        f" in {result.transfer.requests} req" if result.transfer.requests else ""
    )
    return (
        f"[{number:>{width}}/{total}] {result.version:<9} {result.status:<12} ({states})  "
        f"{result.how}, {moved}, {result.seconds:.1f} s"
    )


def train_versions(checkout: Checkout) -> set[Pep440Version]:
    if not present(checkout.layout.train):
        return set()
    return {Pep440Version(version_of_tag(tag)) for tag in checkout.require_train().tags}
