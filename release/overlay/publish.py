"""`publish DIST INDEX_DIR`: our wheels into a PEP 503 index directory, each with its evidence.

Every refusal comes before the index is written: a wheel that is not one, a wheel missing a fix its
release needs, a checkout that `check`'s gates refuse (the same gates, release/queue/status.py), a wheel
that is not byte for byte the tool's own build of its tag (release/overlay/rebuild.py), a wheel whose
evidence does not prove every bug any record names for its release (three runs per bug: pristine, the
wheel, the wheel built without the fix, release/overlay/without.py) or goes backwards from what the index
holds; then the index, then the evidence files beside it (INDEX_DIR/evidence/<wheel>.json).
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.core import log
from release.core.errors import BadInputError, DriftError
from release.core.files import read_regular
from release.core.journal import write_atomic
from release.core.layout import Layout
from release.evidence.gather import Evidence, gather_all, refuse, refuse_backwards, wheel_release
from release.overlay.build import PROJECT
from release.overlay.fixes import build_info, carried_bugs, refuse_wheels_missing_fixes
from release.overlay.index import REQUIREMENTS, open_wheel, preflight, publish
from release.overlay.rebuild import Origin, References, origins
from release.overlay.without import Without
from release.queue.status import check

# Beside simple/ and requirements/: INDEX_DIR/evidence/<wheel>.json, what each published wheel proved.
EVIDENCE = "evidence"
EVIDENCE_LIMIT = 1 << 20  # the doctor reads these with the same bound (the runtime's _doctor/evidence.py)


@dataclass(frozen=True)
class PublishOptions:
    """What `publish` was asked (its arguments and options, one field each)."""

    dist: Path  # a directory of wheels, or one wheel
    index: Path  # the index directory (holds simple/)
    python: str  # the interpreter the evidence runs under
    allow_dirty: bool = False  # publish a dirty build (`build --allow-dirty`) too


def held_evidence(index: Path) -> list[dict[str, Any]]:
    """The evidence the index keeps beside its wheels (INDEX_DIR/evidence/<wheel>.json)."""
    found = []
    for path in sorted((index / EVIDENCE).glob("*.whl.json")):
        try:
            data = json.loads(read_regular(path, EVIDENCE_LIMIT, follow_links=False))
        except (BadInputError, ValueError):
            continue  # not evidence a publish wrote: it proves nothing
        if isinstance(data, dict):
            found.append(data)
    return found


def records_of(wheels: list[Path], held: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """Per wheel, {bug: [where recorded]} from the records outside the checkout: the wheel's own build facts
    (the patches it carries) and the index's evidence of the same release (a bug an earlier level fixed or
    recorded). patches/train.toml and the scan data are gather's to read."""
    found: dict[str, dict[str, list[str]]] = {}
    for wheel in wheels:
        bugs: dict[str, list[str]] = {}
        info = build_info(wheel)
        for bug in sorted(carried_bugs(info) if info is not None else set()):
            bugs.setdefault(bug, []).append("the wheel's build facts")
        version = wheel_release(wheel)
        for old in held:
            if old.get("vllm", {}).get("version") != version:
                continue
            for bug in old.get("bugs", []):
                if isinstance(bug, dict) and (bug.get("verdict") == "fixed" or bug.get("recorded")):
                    bugs.setdefault(str(bug.get("bug")), []).append(
                        f"the index's evidence of {old.get('wheel', {}).get('name')}"
                    )
        found[wheel.name] = bugs
    return found


def refuse_as_check(layout: Layout, wheels: list[Path], allow_dirty: bool) -> None:
    """`check`'s gates, the same function: a queue `check` refuses is not published from, its per-tag gates held for
    the tags of `wheels` (with --allow-dirty, a vendor/ that drifted is the dirt it allows; every other gate holds)."""
    drifted = check(layout, tags={f"v{wheel_release(wheel)}" for wheel in wheels})
    if drifted and not allow_dirty:
        raise DriftError(
            f"vendor/ drifted from pristine + series in {len(drifted)} file(s) (`python -m release check` lists "
            "them); nothing was published"
        )


def prove(
    layout: Layout,
    made: list[Origin],
    options: PublishOptions,
    held: list[dict[str, Any]],
    stack: ExitStack,
    workers: int | None = None,
) -> list[Evidence]:
    """Each wheel (with its origin) proven to be the checkout's build, then its evidence (three runs per bug);
    `workers` wheels at a time (gather_all's default: one per core)."""
    if not made:
        return []
    references = stack.enter_context(References(layout))
    references.verify(made)  # before any test runs: a wheel that is not the checkout's build runs nothing
    without = Without(references, {m.wheel.name: m for m in made}, stack)
    wheels = [m.wheel for m in made]
    return gather_all(layout, wheels, options.python, workers, without=without, records=records_of(wheels, held))


def publish_wheels(layout: Layout, options: PublishOptions) -> int:
    dist = options.dist
    wheels = sorted(dist.glob("*.whl")) if dist.is_dir() else [dist]
    if not wheels or not wheels[0].exists():
        raise BadInputError(f"no wheel in {dist}", hint="build one with `python -m release build` (nox -s build)")
    for wheel in wheels:
        open_wheel(wheel).close()  # a FIFO, a device, a directory or a huge file: refused before any read
    index = options.index.resolve()
    # A wheel for a release affected by a bug it carries no fix for would be installed as the fix.
    refuse_wheels_missing_fixes(layout, wheels)
    # Evidence, not records: each bug's test fails on the wheel's pristine release, passes with the wheel and fails
    # with the wheel built without the fix; gathered for the wheels the publish would add, after every cheaper refusal.
    held = held_evidence(index)
    adding = preflight(wheels, index, project=PROJECT, allow_dirty=options.allow_dirty)
    made = origins(layout, adding, options.allow_dirty)  # a wheel that names no build of this checkout
    refuse_as_check(layout, wheels, options.allow_dirty)
    with ExitStack() as stack:
        proofs = prove(layout, made, options, held, stack)
        for evidence in proofs:
            refuse(evidence, f"not publishing {evidence.wheel}")
            refuse_backwards(evidence, held, f"not publishing {evidence.wheel}")
        outcome = publish(wheels, index, project=PROJECT, allow_dirty=options.allow_dirty)
        # A wheel a killed publish left in the index without its evidence file gets it now (from the cache).
        kept = [w for w in wheels if w.name in outcome.already and not (index / EVIDENCE / f"{w.name}.json").exists()]
        for evidence in prove(layout, origins(layout, kept, options.allow_dirty), options, held, stack):
            refuse(evidence, f"{evidence.wheel} is in the index, but")
            proofs.append(evidence)
    if proofs:
        (index / EVIDENCE).mkdir(exist_ok=True)
    for evidence in proofs:
        if evidence.wheel in outcome.added or evidence.wheel in outcome.already:
            write_atomic(index / EVIDENCE / f"{evidence.wheel}.json", evidence.text())
    for line in outcome.repaired:
        log.note(f"note: {line}")
    for name in outcome.added:
        log.out(f"published {name}")
    for name in outcome.already:
        log.out(f"already published (same bytes) {name}")
    for skipped in outcome.skipped:
        log.out(f"skipped {skipped.name}: {skipped.reason()}")
    for path in outcome.requirements:
        log.out(f"wrote {path}")
    log.out(f"index: file://{(index / 'simple').as_posix()}")
    log.out(f"requirements: file://{(index / REQUIREMENTS).as_posix()}/vllm-X.txt, one per vLLM release X")
    log.out(
        f"install: python -m pip install --no-index --find-links URL/simple/{PROJECT}/ "
        "-r URL/requirements/vllm-X.txt (URL: where INDEX_DIR is served; docs/overlay.md, 'Install')"
    )
    return 0
