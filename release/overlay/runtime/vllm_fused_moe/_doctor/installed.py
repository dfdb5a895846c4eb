"""What is installed: vLLM and FlashInfer (package metadata), the scan data's word on that vLLM release,
and our overlay with the import hook's own decision. Nothing here imports torch or vLLM."""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from dataclasses import replace
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any

from .reading import read_file
from .records import Bug, CarriedPatch, Json, Overlay, Release, ScanData
from .words import MODE_ENV, PACKAGE, PROJECT, SCAN_NAME, SCAN_SCHEMA, ScanSource, Status

# The folder of doctor.py (this package's parent): the scan data of a checkout, or of the wheel, lies there.
HOME = Path(__file__).resolve().parent.parent


def dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def public_version(version: str) -> str:
    """`0.20.0+cu129` -> `0.20.0`: vLLM's local builds are the same source as the release."""
    try:
        from packaging.version import Version  # vLLM depends on packaging; without it, the text

        return str(Version(version).public)
    except Exception:
        return version.split("+", 1)[0]


def version_key(version: str) -> tuple[Any, ...]:
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:
        return (1, tuple(int(part) for part in re.findall(r"\d+", version)))


# ----------------------------------------------------------------------------- the scan data


SCAN_LIMIT = 16 << 20  # the scan data is ~100 kB; the tooling's release/core/files.py bounds it the same


def load_scan(path: Path) -> tuple[ScanData | None, str | None]:
    """The scan data at `path`, or why it cannot be used.

    The tooling's reader is release/model/scan.py (read_scan, is_scan_document); this one is the doctor's own
    because it ships in the wheel, where release/ is not. It holds the same rule (schema 1, `releases` an
    object) and asks for `scanned` too, which the doctor reads."""
    try:
        data = json.loads(read_file(path, SCAN_LIMIT).decode("utf-8"))
    except OSError as exc:
        return None, f"cannot read the scan data {path}: {exc.strerror or exc}"
    except RecursionError:
        return None, f"the scan data {path} is not JSON: nested too deeply to read"
    except ValueError as exc:
        return None, f"the scan data {path} is not JSON: {exc}"
    if not isinstance(data, dict) or data.get("schema") != SCAN_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        return None, f"the scan data {path} has schema {found!r}; this doctor reads schema {SCAN_SCHEMA}"
    if not isinstance(data.get("releases"), dict) or not isinstance(data.get("scanned"), list):
        return None, f"the scan data {path} has no 'releases' table or 'scanned' list"
    return ScanData.from_json(data), None


def find_scan(given: Path | None, overlay_dir: Path | None) -> tuple[Path | None, ScanSource]:
    """Which scan data to read: --scan, else the file beside doctor.py, else the installed overlay's."""
    if given is not None:
        return given.resolve(), ScanSource.GIVEN
    beside = HOME / SCAN_NAME
    if beside.is_file():
        return beside, ScanSource.BESIDE
    if overlay_dir is not None and (overlay_dir / SCAN_NAME).is_file():
        return overlay_dir / SCAN_NAME, ScanSource.OVERLAY
    return None, ScanSource.NONE


def release_facts(scan: ScanData | None, scan_problem: str | None, vllm: str | None) -> Release:
    """What the scan data says about the installed vLLM release; status `unknown` says why not."""
    fixed_in = scan.fixed_in if scan else None
    if vllm is None:
        return Release(Status.UNKNOWN, "vLLM is not installed in this environment", fixed_in)
    if scan is None:
        return Release(Status.UNKNOWN, scan_problem or "no scan data", fixed_in)
    version = public_version(vllm)
    entry = scan.releases.get(version)
    if entry is not None and entry.get("status") in ("affected", "fixed", "not-affected"):
        return listed_release(scan, entry, version)
    return Release(Status.UNKNOWN, unlisted_why(scan, version), fixed_in)


def listed_release(scan: ScanData, entry: Json, version: str) -> Release:
    """A release the scan data lists: its status, per bug, and whether an optional overlay exists."""
    status = Status(entry["status"])
    line = entry.get("line")
    statuses = entry.get("bugs")
    bugs = {}
    for bug, state in (statuses if isinstance(statuses, dict) else {}).items():
        info = scan.bugs.get(bug, {})
        bugs[str(bug)] = Bug(str(state), str(info.get("title") or ""), tuple(str(n) for n in info.get("patches") or []))
    why = release_words(scan, status, bugs, line)
    in_train = bool(entry.get("in_train"))
    optional = in_train and status is not Status.AFFECTED  # the train carries downstream changes for it
    if optional:
        why += (
            f"; an overlay for it is published with downstream changes only (optional: `pip install "
            f"{PROJECT}=={version}` from our index)"
        )
    return Release(
        status, why, scan.fixed_in, line, in_train, entry.get("patches") or {}, entry.get("wheel"),
        entry.get("flashinfer"), bugs, tuple(b for b, i in bugs.items() if i.status == "affected"), optional,
    )  # fmt: skip


def release_words(scan: ScanData, status: Status, bugs: dict[str, Bug], line: object) -> str:
    """What the release has, in the bug table's words (the scan data's `bugs`: each bug's title and the first
    release that fixes it), never one patch's: "has <title> (fixed upstream in X)", "has upstream's fix for ..."."""

    def named(bug: str) -> str:
        title = bugs[bug].title or bug
        first = scan.bugs.get(bug, {}).get("first_fixed")
        return f"{title} ({f'fixed upstream in {first}' if first else 'no upstream release fixes it yet'})"

    has = [named(b) for b, i in bugs.items() if i.status == "affected"]
    fixed = [named(b) for b, i in bugs.items() if i.status == "fixed"]
    where = f" (in its {line} modules)" if line else ""
    if status is Status.AFFECTED:
        words = "this release has " + ("; ".join(has) if has else "a bug our patches fix") + where
        return words + (f"; it has upstream's fix for {'; '.join(fixed)}" if fixed else "")
    if status is Status.FIXED:
        return "this release has upstream's fix for " + ("; ".join(fixed) if fixed else "every bug our patches fix")
    return "this release does not have the affected code"


def unlisted_why(scan: ScanData, version: str) -> str:
    """Why a release the scan data does not list cannot be judged."""
    scanned = scan.scanned
    newest = scan.newest_scanned or ""
    if newest and version_key(version) > version_key(newest):
        return (
            f"vLLM {version} is newer than the newest release in the scan data ({newest}); "
            "cannot tell without guessing: use scan data from a newer vllm-fused-moe"
        )
    if scanned and version_key(version) < version_key(scanned[0]):
        return f"vLLM {version} is older than the oldest release in the scan data ({scanned[0]})"
    return f"vLLM {version} is not a release in the scan data (a development or patched build?)"


# ----------------------------------------------------------------------------- the overlay


def blank_overlay() -> Overlay:
    """`overlay` of a report where our overlay is not installed."""
    return Overlay(version=dist_version(PROJECT), mode=os.environ.get(MODE_ENV))


def overlay_state() -> Overlay:
    """Is our overlay installed here, for which tag, and does the import hook activate it?"""
    state = blank_overlay()
    try:
        spec = find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:  # nothing, or a folder without __init__.py (a namespace)
        if state.version is None:
            return state
        return replace(
            state,
            damaged=True,
            reason=f"{PROJECT} {state.version} is recorded as installed (its .dist-info), but its package "
            f"{PACKAGE}/ is gone: pip takes the record for the install and keeps it",
        )
    found = read_overlay(replace(state, installed=True))
    lost, problem = record_problem()
    if problem is None:
        return found
    # Said first: a file gone explains what reading the overlay ran into (a module that no longer imports).
    reason = problem + (f"; {found.reason}" if found.reason and found.damaged else "")
    leftovers = unrecorded_install() if lost else ()
    return replace(found, damaged=True, record_lost=lost, leftovers=leftovers, reason=reason)


def unrecorded_install() -> tuple[str, ...]:
    """What `pip uninstall` would remove, where RECORD is gone and it cannot: the files our wheel puts in
    site-packages (the package, the .pth, its module, the console script's, the .dist-info) and the
    console script, those of them that are there."""
    try:
        dist = metadata.distribution(PROJECT)
    except metadata.PackageNotFoundError:
        return ()
    site = Path(str(dist.locate_file("")))
    info = site / f"{PACKAGE}-{dist.version}.dist-info"  # how pip and uv name it
    names = (PACKAGE, f"{PACKAGE}.pth", f"_{PACKAGE}_pth.py", f"_{PACKAGE}_cli.py")
    script = Path(sys.executable).with_name(PROJECT)
    return tuple(str(p) for p in (*(site / n for n in names), info, script) if p.exists())


def record_problem() -> tuple[bool, str | None]:
    """(RECORD lost, why our install is not whole): every file our install record lists must be there.

    pip takes the record for the install: with a file of it deleted (the .pth that installs the hook,
    a module, _build_info.json, the .pth's module) `pip install` says "Requirement already satisfied"
    and `pip check` passes. Compiled bytecode (__pycache__/) is left out: Python writes it again. With
    RECORD itself gone pip can neither uninstall the overlay nor reinstall it over itself."""
    try:
        dist = metadata.distribution(PROJECT)
    except metadata.PackageNotFoundError:
        return False, None
    files = dist.files
    if files is None:
        return True, (
            f"the install record of {PROJECT} {dist.version} (its .dist-info/RECORD) is gone: no file of it "
            "can be checked, and pip can neither uninstall it nor reinstall it over itself"
        )
    missing = [str(f) for f in files if "__pycache__" not in f.parts and not Path(str(f.locate())).exists()]
    if not missing:
        return False, None
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return False, (
        f"{len(missing)} file(s) of {PROJECT} {dist.version} that its install record lists are gone ({shown}): "
        "pip takes the record for the install and keeps it"
    )


def read_overlay(state: Overlay) -> Overlay:
    """The installed overlay's build facts and the hook's decision; a broken install is a finding, not a crash."""
    try:
        meta, activate, finder = (importlib.import_module(f"{PACKAGE}.{n}") for n in ("_meta", "_activate", "_finder"))
        info = meta.load()
        chosen = activate.mode()
        vllm = dist_version("vllm")
        state = replace(
            state,
            version=info.get("version") or state.version,
            vllm_tag=info.get("vllm_tag"),
            for_this_vllm=vllm is not None and public_version(vllm) == public_version(str(info.get("vllm_version"))),
            location=str(meta.HERE),
            mode=chosen,
            hook_installed=finder.installed_finder() is not None,
            flashinfer_specifier=info.get("flashinfer_specifier"),
            patches=tuple(p.get("name") for p in info.get("patches", [])),
            carried=tuple(CarriedPatch.from_json(p) for p in info.get("patches", []) if isinstance(p, dict)),
        )
        return hook_decision(state, activate, info, chosen, vllm)
    except Exception as exc:
        reason = f"the installed overlay could not be read: {type(exc).__name__}: {exc}"
        return replace(state, activates=None, reason=reason, damaged=True)


def hook_decision(state: Overlay, activate: ModuleType, info: Json, chosen: str, vllm: str | None) -> Overlay:
    """The hook's own decision, made on the facts it would read when vLLM imports the subtree."""
    decision = getattr(activate, "activation", None)
    if decision is None:
        return replace(state, reason="this overlay is older than the doctor: it cannot say how its hook decides")
    active, reason = decision(info, chosen, vllm, activate.flashinfer_version())
    missing = getattr(activate, "files_problem", lambda: None)()
    damaged = bool(active and missing)  # what decide() adds to activation(): a half-removed package serves nothing
    if damaged:
        active, reason = False, missing
    if chosen not in activate.MODES:
        reason = f"{MODE_ENV}={chosen!r} is not one of {'/'.join(activate.MODES)}; the hook treats it as 'on'" + (
            f"; {reason}" if reason else ""
        )
    return replace(state, activates=bool(active), reason=reason, damaged=damaged)


def carried_bugs(patches: tuple[CarriedPatch, ...], release: Release) -> list[str]:
    """The release's bugs the installed overlay's patches fix: by each patch's `bug` (or its Bug: trailer),
    or by its name or `Varies:` being one of the bug's patches in the scan data."""
    found = []
    for bug, info in release.bugs.items():
        names = set(info.patches)
        for patch in patches:
            said = patch.bug if patch.bug is not None else patch.trailers.get("Bug", "").split(" ", 1)[0]
            if said == bug or patch.name in names or patch.trailers.get("Varies") in names:
                found.append(bug)
                break
    return found


def compare_fixes(overlay: Overlay, release: Release) -> Overlay:
    """What the installed overlay carries against what its release needs (overlay `bugs`, `missing_fixes`)."""
    if not overlay.installed or not overlay.for_this_vllm:
        return overlay
    carried = carried_bugs(overlay.carried, release)
    return replace(
        overlay,
        bugs=tuple(sorted({*carried, *(p.bug for p in overlay.carried if p.bug)})),
        missing_fixes=tuple(bug for bug in release.needs if bug not in carried),
    )
