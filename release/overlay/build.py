"""Build the overlay wheel `vllm-fused-moe`: our runtime code and upstream's vendored files, assembled.

One wheel per vLLM tag: `build` makes the head's from vendor/; `build_train` makes one per
train tag, the head's from vendor/ and every other tag's from its pristine source + the
series, reproduced in a scratch directory and held to the hashes patches/train.toml records.
The build is a list of named steps over one `BuildPlan`: collect the facts (pin, series,
the tag's FlashInfer range: its own pin ∩ VERIFIED.toml), assemble the package in a temporary
directory (`assemble`: release/overlay/runtime/ is ours, vendor/vllm_fused_moe/ upstream's and its
pins; neither is ever written), add the series, the build facts and a generated pyproject.toml,
and build it with hatchling (release/overlay/backend.py: one backend process for every wheel of a command).
Hatchling writes reproducible wheels (sorted entries, normalised modes, zip times from
SOURCE_DATE_EPOCH), and we set SOURCE_DATE_EPOCH from the commit, so two builds of one
commit are byte-identical.

Longer than 500 lines on purpose: the head's build and the train's share every step over `BuildPlan`;
apart, those steps would cross modules as private helpers.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import tomli_w

from release.core import log
from release.core.errors import (
    BadInputError,
    BadPatchLevelError,
    DirtyTreeError,
    OutputNotWritableError,
    ReleaseError,
    TagsNotBuiltError,
    TrainDriftError,
    UnverifiedFlashInferError,
)
from release.core.files import present
from release.core.git import commit_time, git, head_commit
from release.core.hashing import file_sha256, sha256_hex
from release.core.journal import copy_atomic, remove_leftovers, write_atomic
from release.core.layout import (
    BESIDE_SUBTREE,
    BUILD_INFO_NAME,
    OVERLAY_PACKAGE,
    UPSTREAM_PACKAGE,
    Layout,
    writable_dir_problem,
    write_files,
)
from release.core.lock import repo_lock
from release.model.lines import HEAD_LINE, Line, read_lines
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.train import Train, TrainEntry
from release.overlay.backend import BACKEND, BACKEND_MODULE, BACKEND_VERSION, Backend, Isolation, use_isolation
from release.overlay.shipped import shipped_digest
from release.queue.bugs import missing_fixes, refuse_missing_fixes
from release.queue.gates import refuse_stale, refuse_unrecorded, stale_variants
from release.queue.snapshot import Checkout
from release.queue.verified import flashinfer_range, unverified_reason, wheel_range

if TYPE_CHECKING:
    # The overlay package owns the format of the _build_info.json it reads; the tooling only writes it.
    # Not importable at run time (release/overlay/runtime/ is not on sys.path), so for the type checker only.
    from vllm_fused_moe._meta import BuildInfo


PROJECT = "vllm-fused-moe"
PACKAGE = OVERLAY_PACKAGE
# The zip format cannot store times before 1980; used when there is no git commit to date.
ZIP_EPOCH = 315532800
PTH_NAME = f"{PACKAGE}.pth"
# The .pth's module (release/overlay/runtime/_vllm_fused_moe_pth.py): beside the package, not in it, so
# that the kill switch works whatever state the package is in.
PTH_MODULE = "_vllm_fused_moe_pth"
# The console script's module, beside both: it speaks with either the package or the .pth's module gone.
CLI_MODULE = "_vllm_fused_moe_cli"
# One line: site.py executes a .pth line that starts with `import`, at every interpreter start-up of
# the environment. The module reads the switch, then installs the hook or a stand-in; it never raises.
PTH_LINE = f"import {PTH_MODULE}; {PTH_MODULE}.install()\n"


@dataclass(frozen=True)
class BuildPlan:
    layout: Layout
    out: Path
    patch_level: int | None = None
    isolation: Isolation = Isolation.AUTO
    allow_dirty: bool = False  # build a tree that is not its commit; the version and build info say so


@dataclass(frozen=True)
class BuildTarget:
    """What one wheel is made of: a tag's pin, its FlashInfer range and its patched subtree."""

    pin: Pin
    # The PEP 440 range the wheel requires: the pin ∩ VERIFIED.toml; "" where no patch relies on FlashInfer.
    flashinfer: str
    line: Line  # the tag's release line; its modules are what the wheel serves
    patches: tuple[Patch, ...]  # what the tag carries, in series order
    series: str  # the text of the line's series file, which the wheel ships
    subtree: dict[str, bytes] | None = None  # None: vendor/ as it is (the head)
    entry: TrainEntry | None = None  # its entry in patches/train.toml (None: none): its level, what that shipped


def head_target(checkout: Checkout, flashinfer: str, entry: TrainEntry | None = None) -> BuildTarget:
    """The head's wheel, from vendor/ and patches/series as the command read them."""
    line = checkout.line(entry.line if entry is not None else HEAD_LINE)
    patches = tuple(checkout.queue.patches)
    return BuildTarget(checkout.queue.pin, flashinfer, line, patches, checkout.series_text(line), None, entry)


@dataclass(frozen=True)
class BuildResult:
    tag: str
    wheel: Path
    sha256: str
    size: int
    seconds: float
    version: str
    source_date_epoch: int
    isolated: bool
    entry: TrainEntry | None = None  # the tag's entry as this build leaves it: its level and what that level ships


def overlay_version(vllm_version: str, patch_level: int, dirty: bool = False) -> str:
    """`0.20.0+fm.1`: vLLM's version, then our patch level as a PEP 440 local label.

    A local label is PEP 440's word for "upstream's release plus downstream patches". Its
    number is a separate dot segment so it compares as an integer (fm.10 > fm.9; fm10 < fm9).
    A build of a tree that is not its commit (`--allow-dirty`) ends in `.dirty`.
    """
    if patch_level < 1:
        raise BadPatchLevelError(f"patch level {patch_level} is not a positive integer")
    return f"{vllm_version}+fm.{patch_level}" + (".dirty" if dirty else "")


def build(plan: BuildPlan) -> BuildResult:
    """The head's wheel, from vendor/ (what `python -m release build` makes)."""
    with repo_lock(plan.layout, "build"):
        _refuse_unwritable_or_missing(plan)
        checkout = Checkout.load(plan.layout)  # under the lock: every stage below reads the checkout from it
        dirty = _checked_inputs(plan, checkout)
        pin = checkout.queue.pin
        patches = checkout.queue.patches
        if not patches:
            raise BadInputError(
                f"not building {pin.tag}: patches/series applies nothing at the head (every patch retired); "
                "an overlay would ship vLLM's own files",
                hint="build the tags that carry something: `python -m release build --all`",
            )
        entry = checkout.train_entry(pin.tag)
        line = entry.line if entry is not None else HEAD_LINE
        what = f"not building {pin.tag}"
        refuse_missing_fixes(what, pin.tag, missing_fixes(checkout, pin.tag, patches), [p.name for p in patches], line)
        if entry is not None and not dirty:  # a dirty build says so in its version; publish refuses it
            refuse_unrecorded(what, entry, patches)
            if plan.patch_level is not None:
                entry.refuse_level(plan.patch_level)
        flashinfer = flashinfer_range(checkout.verified, pin.tag, pin.flashinfer, patches)
        target = head_target(checkout, flashinfer, entry)
        with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-build-") as scratch, backend_for(plan) as backend:
            result = build_target(plan, target, Path(scratch), dirty, backend)
            delivered = _deliver(result, plan.out)
            record_levels(plan, [result], checkout.train)
            return delivered


def _checked_inputs(plan: BuildPlan, checkout: Checkout) -> list[str]:
    """Refuse a dirty tree (unless --allow-dirty) before anything is built (after _refuse_unwritable_or_missing).

    Returns what is dirty (empty for a clean tree); the version and build info say so.
    """
    dirty = dirty_reasons(checkout)
    if dirty and not plan.allow_dirty:
        shown = "; ".join(dirty[:5]) + (f"; and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        # The commonest dirt after a first build: the patch levels it recorded (docs/maintainers.md, step 4).
        levels = dirty == [f"{plan.layout.train.relative_to(plan.layout.root).as_posix()} (changed)"]
        hint = (
            "a build recorded new patch levels there: commit patches/train.toml, then build again" if levels else None
        )
        raise DirtyTreeError(f"the tree is not what its commit and pin say: {shown}", hint)
    return dirty


def _refuse_unwritable_or_missing(plan: BuildPlan) -> None:
    problem = writable_dir_problem(plan.out)
    if problem:
        raise OutputNotWritableError(f"--out {plan.out}: {problem}; nothing was built")
    runtime = (*(plan.layout.runtime / f"{m}.py" for m in (PTH_MODULE, CLI_MODULE)), plan.layout.runtime_package)
    parts = (*runtime, *(plan.layout.vendored / name for name in BESIDE_SUBTREE))
    missing = [part for part in parts if not part.exists()]
    if missing:
        raise BadInputError(
            f"{missing[0]} is missing; the wheel is made of release/overlay/runtime/ (ours) and "
            "vendor/vllm_fused_moe/ (upstream's files and their pins); nothing was built",
            hint="restore it from git (`git checkout -- PATH`); --root must name a whole checkout",
        )


def build_train(plan: BuildPlan, tags: list[str] | None = None) -> list[BuildResult]:
    """One wheel per train tag (all, or the named ones), each proven against patches/train.toml.

    Named tags (`--tag`) are all or nothing: every tag's FlashInfer range and tree are settled, and
    every wheel is built in a scratch directory, before the first one is copied to `plan.out`.
    `--all` builds every tag it can and then raises TagsNotBuiltError naming each tag it could not
    build, with the reason: one tag's refusal does not keep the others' wheels from users.
    """
    with repo_lock(plan.layout, "build --all" if tags is None else "build --tag"):
        return _build_train(plan, tags)


def _build_train(plan: BuildPlan, tags: list[str] | None) -> list[BuildResult]:
    # Imported here, not at the top: train check reads releases (release.pristine pulls in requests,
    # ~0.4 s of start-up) and building the head's wheel alone never does.
    from release.train.check import check_train, select

    layout = plan.layout
    _refuse_unwritable_or_missing(plan)
    checkout = Checkout.load(layout)  # under the lock: every stage below reads the checkout from it
    dirty = _checked_inputs(plan, checkout)
    entries = select(checkout.require_train(), tags)
    chosen = [e.tag for e in entries]
    refused: dict[str, str] = {}  # tag -> why it is not built (--all only; named tags raise)
    lines = checkout.lines
    series = {e.tag: checkout.tag_patches(lines.get(e.line), e.tag) for e in entries}
    # A tag the scan data calls affected by a bug whose series carries no patch for it is refused before
    # anything is replayed: its wheel would tell users the fix is there.
    for e in entries:
        missing = missing_fixes(checkout, e.tag, series[e.tag], list(e.bugs))
        _settle(refused, e.tag, tags, refuse_missing_fixes, f"not building {e.tag}", e.tag, missing,
                [p.name for p in series[e.tag]], e.line)  # fmt: skip
    # A line's variant carried from another version of its common patch would ship the old change.
    for e in entries:
        stale = stale_variants(checkout, {f"patches/lines/{e.line}/{p.name}" for p in series[e.tag]})
        _settle(refused, e.tag, tags, refuse_stale, f"not building {e.tag}", stale)
    if plan.patch_level is not None and not dirty:
        for e in entries:  # a bad --patch-level is bad input for every tag: refused before anything is built
            e.refuse_level(plan.patch_level)
    entries = [e for e in entries if e.tag not in refused]
    log.note(f"build: reproducing {len(entries)} train tag(s) from their pristine sources (train check)")
    started = time.perf_counter()
    checks = check_train(checkout, [e.tag for e in entries]) if entries else []
    log.note(f"build: every tag reproduced its recorded hashes ({time.perf_counter() - started:.1f} s)")
    bad = [finding for c in checks for finding in c.findings]
    if bad and tags is not None:
        raise TrainDriftError(
            "the train does not reproduce, nothing was built: " + "; ".join(f.line() for f in bad[:5]),
            hint="`python -m release train check` lists every tag and file that differ",
        )
    for c in checks:
        if c.findings:
            refused[c.tag] = "it does not reproduce what patches/train.toml records: " + "; ".join(
                f.line() for f in c.findings[:3]
            )
    head = checkout.queue.pin.tag
    empty = [c.tag for c in checks if c.replay is not None and not c.replay.applied and c.tag not in refused]
    if empty and tags is not None:
        raise BadInputError(
            f"not building {', '.join(empty)}: its series carries nothing there (every patch upstream or skipped); "
            "an overlay would ship vLLM's own files"
        )
    note_no_wheel(empty)
    # The level of each wheel is the one patches/train.toml records for what its tag carries now (a dirty
    # build says in its version that it is not its commit, and publish refuses it).
    carried = {c.tag: [p for p in series[c.tag] if p.name in c.replay.applied] for c in checks if c.replay is not None}
    # VERIFIED.toml is the contract of the patches that rely on FlashInfer (Depends-On): a tag whose wheel carries
    # one (what its replay applies, not what its series names: 0001 is upstream from v0.22.0 on) needs a verified
    # version inside its pin; a tag whose wheel carries none asks nothing of FlashInfer.
    verified = checkout.verified
    shipped = {e.tag: carried.get(e.tag, series[e.tag]) for e in entries}
    ranges = {e.tag: wheel_range(verified, e.flashinfer, shipped[e.tag]) for e in entries}
    unverified = [e for e in entries if ranges[e.tag] is None and e.tag not in refused and e.tag not in empty]
    if unverified and tags is not None:
        raise UnverifiedFlashInferError(
            "; ".join(unverified_reason(e.tag, e.flashinfer, verified, shipped[e.tag]) for e in unverified)
            + "; nothing was built"
        )
    for e in unverified:
        refused[e.tag] = unverified_reason(e.tag, e.flashinfer, verified, shipped[e.tag])
    for entry in entries:
        if entry.tag not in empty and entry.tag in carried and not dirty:
            _settle(refused, entry.tag, tags, refuse_unrecorded, f"not building {entry.tag}", entry, carried[entry.tag])
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-build-") as scratch, backend_for(plan) as backend:
        for entry, checked in zip(entries, checks, strict=True):
            if entry.tag in empty or entry.tag in refused:
                continue
            flashinfer = str(ranges[entry.tag])
            if entry.tag == head:
                # vendor/ is the head; check_train just proved it holds exactly the recorded files.
                target = head_target(checkout, flashinfer, entry)
            else:
                assert checked.replay is not None  # a check without findings made the tree
                line = lines.get(entry.line)
                pin = entry.pin(line.root)
                # What the replay applied: a patch already upstream on this tag is not in its wheel.
                applied = tuple(p for p in series[entry.tag] if p.name in checked.replay.applied)
                series_text = checkout.series_text(line)
                target = BuildTarget(pin, flashinfer, line, applied, series_text, checked.replay.files, entry)
            results.append(build_target(plan, target, Path(scratch) / entry.tag, dirty, backend))
            built, total = results[-1], len(entries) - len(empty)
            log.note(f"build: {len(results)}/{total} vLLM {entry.tag}: {built.version} ({built.seconds:.1f} s)")
        delivered = [_deliver(result, plan.out) for result in results]
        record_levels(plan, results, checkout.train)
    if refused:
        raise TagsNotBuiltError(
            f"{len(refused)} of {len(refused) + len(delivered) + len(empty)} train tags not built "
            f"({len(delivered)} wheels in {plan.out}): "
            + "; ".join(f"{t}: {refused[t]}" for t in chosen if t in refused),
            built=tuple(delivered),
        )
    return delivered


def note_no_wheel(tags: list[str]) -> None:
    """Say (a note: `-q` leaves it out) which train tags get no wheel because their series carries nothing."""
    for tag in tags:
        log.note(f"note: {tag} carries no patch (the head at a release that has every fix): no wheel")


def _settle(
    refused: dict[str, str], tag: str, named: list[str] | None, gate: Callable[..., None], *args: object
) -> None:
    """Run one gate for one tag: for named tags (`--tag`) its refusal stops the build; for `--all` it is
    recorded in `refused` (the first reason a tag has) and the other tags go on."""
    if tag in refused:
        return
    try:
        gate(*args)
    except ReleaseError as exc:
        if named is not None:
            raise
        refused[tag] = str(exc)


def backend_for(plan: BuildPlan) -> Backend:
    """The backend every wheel of this command is built by (one process without isolation)."""
    return Backend(use_isolation(plan.isolation), source_date_epoch(plan.layout.root))


def build_target(
    plan: BuildPlan, target: BuildTarget, scratch: Path, dirty: list[str], backend: Backend
) -> BuildResult:
    """One wheel in `scratch`; `dirty` (from _checked_inputs) marks the version and the build info."""
    started = time.perf_counter()
    patches = list(target.patches)
    # --patch-level, else the tag's level in patches/train.toml, else (a tag the train does not hold) the
    # number of patches it carries.
    entry = target.entry
    level = plan.patch_level if plan.patch_level is not None else (entry.patch_level if entry else max(len(patches), 1))
    version, built = _build_at(plan, target, scratch, patches, level, backend, dirty)
    if entry is not None and not dirty:
        # The level follows the bytes the wheel ships: files other than those its level shipped go one level
        # up (built again at it: the version is inside the wheel); a dirty build's version says .dirty instead.
        entry = entry.shipped_at(shipped_digest(built, version), plan.patch_level)
        if entry.patch_level != level:
            version, built = _build_at(plan, target, scratch, patches, entry.patch_level, backend, dirty)
    data = built.read_bytes()
    return BuildResult(
        target.pin.tag,
        built,
        sha256_hex(data),
        len(data),
        time.perf_counter() - started,
        version,
        backend.epoch,
        backend.isolated,
        entry if entry is not None and not dirty else None,
    )


def _build_at(
    plan: BuildPlan,
    target: BuildTarget,
    scratch: Path,
    patches: list[Patch],
    level: int,
    backend: Backend,
    dirty: list[str],
) -> tuple[str, Path]:
    """The wheel of `target` at patch `level`, staged and built under `scratch` (replacing an earlier try)."""
    version = overlay_version(target.pin.version, level, dirty=bool(dirty))
    shutil.rmtree(scratch / "src", ignore_errors=True)
    shutil.rmtree(scratch / "dist", ignore_errors=True)
    stage_package(plan.layout, scratch / "src", version, target, patches, backend.epoch, dirty)
    return version, backend.build(scratch / "src", scratch / "dist")


def record_levels(plan: BuildPlan, results: list[BuildResult], train: Train | None) -> None:
    """Record in patches/train.toml each built tag's level and what it ships, in one rename; nothing when every
    tag's record is already that (a rebuild of the same files writes nothing), nor for an --allow-dirty build
    (a build for a look, never for an index users install from: the checkout is only read). `train`: the train
    as the command read it under its lock (None: the checkout has none)."""
    layout = plan.layout
    if plan.allow_dirty or train is None:
        return
    changed = train
    for result in results:
        now = changed.get(result.tag)
        if (
            result.entry is not None
            and now is not None
            and (now.level, now.shipped)
            != (
                result.entry.patch_level,
                result.entry.shipped,
            )
        ):
            raised = now.patch_level != result.entry.patch_level
            changed = changed.with_entry(replace(now, level=result.entry.patch_level, shipped=result.entry.shipped))
            if raised:
                log.out(
                    f"{result.tag}: patch level {result.entry.patch_level} (was {now.patch_level}: its wheel ships "
                    "other files); recorded in patches/train.toml"
                )
    if changed != train:
        write_atomic(layout.train, changed.dumps().encode("utf-8"))


def _deliver(result: BuildResult, out: Path) -> BuildResult:
    """Copy the wheel into --out beside its final name and rename it into place (copy_atomic).

    A build killed at any instant leaves under the final name the wheel that was there before,
    or the whole new one; never a truncated file that looks complete. A kill during the copy
    leaves a hidden `.NAME.whl.tmp-PID` that neither pip, `publish` nor `*.whl` picks up and that
    the next build into --out removes, saying so.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        target = out / result.wheel.name
        removed = _remove_partial_wheels(out) + copy_atomic(result.wheel, target)
    except OSError as exc:
        raise OutputNotWritableError(f"cannot write the wheel into {out}: {exc}") from None
    for leftover in removed:
        log.note(f"note: removed {leftover}, the partial copy of a killed build")
    return replace(result, wheel=target)


def _remove_partial_wheels(out: Path) -> list[Path]:
    """The partial copies killed builds left in --out, of any wheel (each named by its final name)."""
    removed: list[Path] = []
    for leftover in sorted(out.glob(".*.whl.tmp-*")):
        removed += remove_leftovers(out / leftover.name[1:].rsplit(".tmp-", 1)[0])
    return removed


def dirty_reasons(checkout: Checkout) -> list[str]:
    """Why the tree is not exactly its commit + pin + series (empty when it is).

    - vendor/'s subtree against pristine(UPSTREAM.toml) + series (`check`), in any tree;
    - links anywhere in what the wheel is made of (never followed, never shipped, even dirty);
    - in a git checkout, every change to vendor/vllm_fused_moe/, release/overlay/runtime/ and
      patches/ that is not committed: hand edits of the hook, a deleted file, an extra file
      (ignored ones too, since the build would ship them), so the commit in the build info is the truth.
    """
    layout = checkout.layout
    tops = (layout.vendored, layout.runtime, layout.patches)
    links = [p for top in tops for p in _walk(top) if p.is_symlink()]
    if links:
        raise BadInputError(
            f"{links[0]} is a symbolic link; a build never follows or ships links (not even with --allow-dirty)",
            hint="replace the link by the file it stands for, or remove it",
        )
    found = checkout.drift()[0]
    reasons = [f"{d.path} ({d.kind})" for d in found]
    toplevel = git("rev-parse", "--show-toplevel", cwd=layout.root, check=False)
    if toplevel.ok and Path(toplevel.out.strip()).resolve() == layout.root.resolve():
        paths = [top.relative_to(layout.root).as_posix() for top in tops]
        listing = git(
            "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching", "--", *paths,
            cwd=layout.root,
        ).stdout  # fmt: skip
        for entry in listing.decode("utf-8", "replace").split("\0"):
            code, path = entry[:2], entry[3:]
            if not entry or "__pycache__" in path.split("/") or path.endswith(".pyc"):
                continue
            what = {"??": "not committed", "!!": "ignored by git but would be shipped"}.get(code, "changed")
            reasons.append(f"{path} ({what})")
    return reasons


def _walk(top: Path) -> list[Path]:
    found: list[Path] = []
    if top.is_symlink():
        return [top]
    for directory, subdirs, files in os.walk(top):
        found += [Path(directory) / name for name in [*subdirs, *files]]
    return found


def source_date_epoch(root: Path) -> int:
    """SOURCE_DATE_EPOCH if the caller set it, else the commit time of HEAD."""
    configured = os.environ.get("SOURCE_DATE_EPOCH")
    if configured:
        try:
            return max(int(configured), ZIP_EPOCH)
        except ValueError:
            raise BadInputError(f"SOURCE_DATE_EPOCH={configured!r} is not an integer") from None
    committed = commit_time(root)
    return max(committed, ZIP_EPOCH) if committed is not None else ZIP_EPOCH


# ----------------------------------------------------------------------- staging


def stage_package(
    layout: Layout,
    stage: Path,
    version: str,
    target: BuildTarget,
    patches: list[Patch],
    epoch: int,
    dirty: list[str],
) -> None:
    line = target.line
    package = assemble(layout, stage, line, target.subtree, target.pin if target.subtree is not None else None)
    (package / "patches").mkdir()
    # The series this wheel's files carry: patches/series for the head line, the line's own otherwise.
    (package / "patches" / "series").write_text(target.series, encoding="utf-8")
    for patch in patches:
        (package / "patches" / patch.name).write_text(patch.text, encoding="utf-8")
    targets = line.targets(line.overlay_dir)
    info = build_info(layout, version, target, patches, epoch, targets, dirty, served_files(package, targets))
    (package / BUILD_INFO_NAME).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (stage / "pyproject.toml").write_text(pyproject(version, target.pin, target.flashinfer), encoding="utf-8")
    (stage / "README.md").write_text(readme(version, target.pin, patches), encoding="utf-8")


def assemble(
    layout: Layout,
    stage: Path,
    line: Line | None = None,
    subtree: dict[str, bytes] | None = None,
    pin: Pin | None = None,
) -> Path:
    """The wheel's top level in `stage`, as site-packages will hold it; returns the package folder.

    Ours, from release/overlay/runtime/: the .pth's module, the console script's and `vllm_fused_moe/` (the hook, the
    doctor, the scan data). Upstream's, from vendor/vllm_fused_moe/: the vendored subtree (or
    `subtree`, another train tag's replay, with its `pin`) in the line's folder, its LICENSE and
    NOTICE, UPSTREAM.toml and VERIFIED.toml. Without build facts (_build_info.json, patches/), the
    package reads its facts from the pins beside it, as it did in a source checkout.
    """
    package = stage / PACKAGE
    caches = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(layout.runtime_package, package, ignore=caches)
    for module in (PTH_MODULE, CLI_MODULE):
        shutil.copyfile(layout.runtime / f"{module}.py", stage / f"{module}.py")
    line = line or head_line(layout)
    write_files(package / line.overlay_dir, subtree if subtree is not None else layout.vendor_files())
    for name in BESIDE_SUBTREE:
        shutil.copyfile(layout.vendored / name, package / name)
    if pin is not None:
        (package / "UPSTREAM.toml").write_text(pin.dumps(), encoding="utf-8")
    (stage / PTH_NAME).write_text(PTH_LINE, encoding="utf-8")
    return package


def served_files(package: Path, targets: dict[str, str]) -> dict[str, str]:
    """{path below the package: sha256} of every file the wheel serves under vLLM's names.

    The hook checks each one before it serves any (vllm_fused_moe._activate.files_problem): a
    module deleted or changed after the install means upstream's modules run, with one warning,
    rather than a ModuleNotFoundError inside vLLM.
    """
    files: dict[str, str] = {}
    for rel in targets.values():
        top = package / rel.rstrip("/")
        found = sorted(p for p in top.rglob("*") if p.is_file()) if rel.endswith("/") else [top]
        for path in found:
            files[path.relative_to(package).as_posix()] = file_sha256(path)
    return files


def head_line(layout: Layout) -> Line:
    """The head's release line: the one its train entry names (the head line by default)."""
    pin = Pin.load(layout.upstream_toml)
    entry = Train.load(layout.train).get(pin.tag) if present(layout.train) else None
    return read_lines(layout.lines).get(entry.line if entry else HEAD_LINE)


def build_info(
    layout: Layout,
    version: str,
    target: BuildTarget,
    patches: list[Patch],
    epoch: int,
    targets: dict[str, str] | None = None,
    dirty: list[str] | None = None,
    files: dict[str, str] | None = None,
) -> BuildInfo:
    pin = target.pin
    return {
        "dirty": list(dirty or []),
        "version": version,
        "vllm_tag": pin.tag,
        "vllm_version": pin.version,
        "vllm_wheel": pin.wheel,
        "vllm_wheel_sha256": pin.wheel_sha256,
        "upstream_source": pin.source,
        "upstream_package": pin.subtree.replace("/", "."),
        "targets": targets if targets is not None else {UPSTREAM_PACKAGE: "prepare_finalize/"},
        "files": dict(files or {}),
        "flashinfer_pin": pin.flashinfer,
        "flashinfer_specifier": target.flashinfer,
        "commit": head_commit(layout.root),
        "source_date_epoch": epoch,
        # What the wheel carries, each with the bug it fixes ("" for a downstream change): doctor compares these
        # with the bugs its vLLM release has (the scan data), so a wheel missing a fix is never "fixed-live".
        "patches": [
            {"name": p.name, "subject": p.subject, "bug": p.purpose.bug, "trailers": p.trailers} for p in patches
        ],
    }


def pyproject(version: str, pin: Pin, flashinfer_specifier: str) -> str:
    modules = pin.subtree.rsplit("/", 1)[-1]  # prepare_finalize for the head line, fused_moe for older ones
    wheel_target = {
        "packages": [PACKAGE],
        "force-include": {PTH_NAME: PTH_NAME, **{f"{m}.py": f"{m}.py" for m in (PTH_MODULE, CLI_MODULE)}},
    }
    return tomli_w.dumps(
        {
            "build-system": {"requires": [f"{BACKEND}=={BACKEND_VERSION}"], "build-backend": BACKEND_MODULE},
            "project": {
                "name": PROJECT,
                "version": version,
                "description": f"vLLM {pin.tag} fused-MoE {modules} with the vllm-fused-moe patch series, "
                "activated in place",
                "readme": "README.md",
                "license": "Apache-2.0",
                "requires-python": ">=3.10",
                # No FlashInfer requirement of ours where no carried patch relies on FlashInfer (flashinfer_specifier
                # ""): vLLM's own pin stands.
                "dependencies": [f"vllm=={pin.version}"]
                + ([f"flashinfer-python{flashinfer_specifier}"] if flashinfer_specifier else []),
                # A module beside the package: the script still speaks when the package is gone.
                "scripts": {"vllm-fused-moe": f"{CLI_MODULE}:main"},
            },
            "tool": {"hatch": {"build": {"targets": {"wheel": wheel_target}}}},
        }
    )


def readme(version: str, pin: Pin, patches: list[Patch]) -> str:
    lines = [
        f"# vllm-fused-moe {version}",
        "",
        f"vLLM {pin.tag}'s `{pin.subtree.replace('/', '.')}` modules with these patches, served under the",
        "upstream module names by an import hook (`vllm_fused_moe.pth`). `VLLM_FUSED_MOE=off` disables it,",
        "`VLLM_FUSED_MOE=strict` turns a version mismatch into an error. `vllm-fused-moe info` tells all.",
        "",
    ]
    lines += [f"- {p.name}: {p.subject} (Origin: {p.trailers.get('Origin', 'ours')})" for p in patches]
    return "\n".join(lines) + "\n"
