"""`publish DIST INDEX_DIR`: our wheels into a PEP 503 index directory, each with its evidence.

Every refusal comes before the index is written: a wheel that is not one, a wheel missing a fix its
release needs, a wheel whose evidence does not prove its fixes or goes backwards from what the index
holds; then the index, then the evidence files beside it (INDEX_DIR/evidence/<wheel>.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.core import log
from release.core.errors import BadInputError
from release.core.files import read_regular
from release.core.journal import write_atomic
from release.core.layout import Layout
from release.evidence.gather import gather_all, refuse, refuse_backwards
from release.overlay.build import PROJECT
from release.overlay.fixes import refuse_wheels_missing_fixes
from release.overlay.index import REQUIREMENTS, open_wheel, preflight, publish

# Beside simple/ and requirements/: INDEX_DIR/evidence/<wheel>.json, what each published wheel proved.
EVIDENCE = "evidence"
EVIDENCE_LIMIT = 1 << 20  # the doctor reads these with the same bound (the runtime's _doctor/evidence.py)


@dataclass(frozen=True)
class PublishOptions:
    """What `publish` was asked (its arguments and options, one field each)."""

    dist: Path  # a directory of wheels, or one wheel
    index: Path  # the index directory (holds simple/)
    python: str | None  # the interpreter the evidence runs under (None: each line's proving environment)
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
    # Evidence, not records: each bug's test fails on the wheel's pristine release and passes with the wheel;
    # gathered for the wheels the publish would add, after every cheaper refusal.
    held = held_evidence(index)
    proofs = gather_all(
        layout, preflight(wheels, index, project=PROJECT, allow_dirty=options.allow_dirty), options.python
    )
    for evidence in proofs:
        refuse(evidence, f"not publishing {evidence.wheel}")
        refuse_backwards(evidence, held, f"not publishing {evidence.wheel}")
    outcome = publish(wheels, index, project=PROJECT, allow_dirty=options.allow_dirty)
    # A wheel a killed publish left in the index without its evidence file gets it now (from the cache).
    kept = [w for w in wheels if w.name in outcome.already and not (index / EVIDENCE / f"{w.name}.json").exists()]
    for evidence in gather_all(layout, kept, options.python):
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
