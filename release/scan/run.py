"""`scan`: which vLLM releases on the index carry the bugs our patches fix.

The job, step by step: list every final release on the package index (build-tagged wheels
and post releases included, pre-releases left out); for each, read only the modules of our
release lines out of its wheel (range requests, or the cache); put it on a line; then
classify each patch (the series and the retired ones) exactly as `rebase` does
(release/queue/upstreamed.classify: `git apply`, reverse apply, the semantic check, `git am
--3way`) on a scratch repository holding that release's modules; and finally merge the
result into the document we ship (release/overlay/runtime/vllm_fused_moe/affected-releases.json,
beside the doctor) and its human form (docs/affected-releases.md).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from release.core import log
from release.core.errors import BadTagError
from release.core.git import WorkRepo
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.core.versions import version_of_tag
from release.model.lines import Line, Lines, load_lines, read_lines
from release.model.outcome import PatchStatus, ReleaseStatus
from release.model.patch import Patch
from release.model.train import Train
from release.pristine import safe
from release.pristine.index import Release, index_url, releases, sdist_only
from release.pristine.lazy_wheel import Transfer
from release.pristine.wheel import pypi_content
from release.queue.drift import unapply
from release.queue.load import Queue, line_patches
from release.queue.upstreamed import classify


@dataclass
class ScanOptions:
    layout: Layout
    since: Version | None = None
    until: Version | None = None


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

    @property
    def status(self) -> ReleaseStatus:
        return release_status(self.patches)


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


def release_status(patches: Mapping[str, str]) -> ReleaseStatus:
    """affected: a patch applies (or would, once a variant resolves its conflict); fixed: upstream has
    them; not-affected: none of their code is there. `patches` may come from a previous document (JSON)."""
    states = {PatchStatus(state) for state in patches.values()}
    if states & {PatchStatus.APPLIES, PatchStatus.CONFLICT}:
        return ReleaseStatus.AFFECTED
    if PatchStatus.UPSTREAM in states:
        return ReleaseStatus.FIXED
    return ReleaseStatus.NOT_AFFECTED


def parse_bound(text: str) -> Version:
    try:
        version = Version(text.strip().removeprefix("v"))
    except InvalidVersion:
        raise BadTagError(f"{text!r} is not a vLLM release (expected e.g. v0.17.0 or 0.10.1.1)") from None
    if version.is_prerelease or version.is_devrelease:
        raise BadTagError(f"{text!r} is a pre-release; scan covers final releases only")
    return version


def scan_patches(layout: Layout) -> tuple[Queue, list[Patch]]:
    """The series, then the retired patches: a retired patch still says who was affected."""
    queue = Queue.load(layout)
    retired = [Patch.load(path) for path in sorted(layout.retired.glob("*.patch"))] if layout.retired.is_dir() else []
    names = {p.name for p in queue.patches}
    return queue, [*[p for p in retired if p.name not in names], *queue.patches]


def in_range(version: Version, options: ScanOptions) -> bool:
    return (options.since is None or version >= options.since) and (options.until is None or version <= options.until)


def scan(options: ScanOptions) -> ScanResult:
    started = time.monotonic()
    layout = options.layout
    queue, patches = scan_patches(layout)
    lines = load_lines(layout.lines)
    # An older line's series: each of its patches stands in for the common patch it varies.
    variants = {line.name: line_variants(layout, line, patches) for line in lines if not is_head(layout, line)}
    # The pinned pristine tree goes into each scratch repository first, as in rebase, so that
    # `git am --3way` finds each patch's pre-image blobs.
    pinned_pristine, _ = unapply(layout.vendor_files(), queue.patches)
    base = index_url()
    listed = [r for r in releases(base) if in_range(r.version, options)]
    skipped = {v: "no wheel on the index (sdist only)" for v in sdist_only(base) if in_range(Version(v), options)}
    skipped |= {str(r.version): r.why_none for r in listed if r.wheel is None}
    todo = [r for r in listed if r.wheel is not None]
    log.note(f"scanning {len(todo)} vLLM release(s) on {base} for {len(patches)} patch(es)")
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-scan-") as tmp:
        for number, release in enumerate(todo, 1):
            result = scan_release(release, lines, patches, pinned_pristine, Path(tmp), variants)
            results.append(result)
            log.note(progress_line(number, len(todo), result))
    return ScanResult(results, skipped, patches, time.monotonic() - started, read_lines(layout.lines))


def is_head(layout: Layout, line: Line) -> bool:
    """The head line takes patches/series itself (vendor/ holds it)."""
    return line.series_path(layout.root) == layout.series


def line_variants(layout: Layout, line: Line, patches: list[Patch]) -> dict[str, Patch]:
    """{common patch name: the patch this line applies in its place} (a variant, or the patch itself)."""
    known = {p.name for p in patches}
    out: dict[str, Patch] = {}
    for patch in line_patches(layout, line):
        varies = patch.trailers.get("Varies", patch.name)
        out[varies if varies in known else patch.name] = patch
    return out


def scan_release(
    release: Release,
    lines: list[Line],
    patches: list[Patch],
    pinned: dict[str, bytes],
    tmp: Path,
    variants: dict[str, dict[str, Patch]] | None = None,
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
        found = classify_patches(list(own.values()), line.relative(content.files), {}, tmp / version, line.root)
        by_variant = {variant.name: found[variant.name] for variant in own.values()}
        states = {p.name: by_variant[own[p.name].name] if p.name in own else PatchStatus.ABSENT for p in patches}
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
    )


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
        if pinned:
            repo.commit_subtree(pinned, "pinned pristine")
        repo.commit_subtree(files, "release pristine")
        for patch in present:
            patch_file = work / ".patches" / patch.name
            patch_file.parent.mkdir(parents=True, exist_ok=True)
            patch_file.write_text(patch.text, encoding="utf-8")
            decided = classify(repo, patch, patch_file)
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


def train_versions(layout: Layout) -> set[Version]:
    if not layout.train.is_file():
        return set()
    return {Version(version_of_tag(tag)) for tag in Train.load(layout.train).tags}
