"""`python -m release publish DIST INDEX_DIR`: add our wheels to a PEP 503 index directory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from release.core import flags, log
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
EVIDENCE_LIMIT = 1 << 20


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"Add the {PROJECT} wheels in DIST (a directory or one .whl) to the PEP 503 index in INDEX_DIR "
        "(created if missing), and write INDEX_DIR/requirements/vllm-X.txt for each vLLM release X: our "
        "newest wheel for X, pinned by version and sha256. Users install through that file, never by name "
        f"(pip install --no-index --find-links URL/simple/{PROJECT}/ -r URL/requirements/vllm-X.txt; "
        "docs/overlay.md, 'Install'). Rerunning is a no-op; nothing is written unless every wheel passes. "
        "Each wheel first proves its fixes under --python (INDEX_DIR/evidence/<wheel>.json). "
        "What is refused (exit 2, index unchanged) and what is repaired: docs/overlay.md, 'The index'."
    )
    parser.add_argument("dist", type=Path, metavar="DIST", help="a directory of wheels, or one wheel")
    parser.add_argument("index", type=Path, metavar="INDEX_DIR", help="the index directory (holds simple/)")
    parser.add_argument(
        "--python",
        default=sys.executable,
        metavar="PYTHON",
        help="the interpreter the evidence runs under: one with torch (CPU) and vLLM's import-time packages, "
        "pytest and pip (`nox -s publish` makes one); default: this one",
    )
    flags.add_allow_dirty(
        parser,
        help="publish a dirty build (`build --allow-dirty`, version X+fm.N.dirty) too; refused without it "
        "(exit 2), as its requirements file would pin it: only for an index no user installs from",
    )


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


def run(args: argparse.Namespace, layout: Layout) -> int:
    dist: Path = args.dist
    wheels = sorted(dist.glob("*.whl")) if dist.is_dir() else [dist]
    if not wheels or not wheels[0].exists():
        raise BadInputError(f"no wheel in {dist}", hint="build one with `python -m release build` (nox -s build)")
    for wheel in wheels:
        open_wheel(wheel).close()  # a FIFO, a device, a directory or a huge file: refused before any read
    index: Path = args.index.resolve()
    # A wheel for a release affected by a bug it carries no fix for would be installed as the fix.
    refuse_wheels_missing_fixes(layout, wheels)
    # Evidence, not records: each bug's test fails on the wheel's pristine release and passes with the wheel;
    # gathered for the wheels the publish would add, after every cheaper refusal.
    held = held_evidence(index)
    proofs = gather_all(layout, preflight(wheels, index, project=PROJECT, allow_dirty=args.allow_dirty), args.python)
    for evidence in proofs:
        refuse(evidence, f"not publishing {evidence.wheel}")
        refuse_backwards(evidence, held, f"not publishing {evidence.wheel}")
    outcome = publish(wheels, index, project=PROJECT, allow_dirty=args.allow_dirty)
    # A wheel a killed publish left in the index without its evidence file gets it now (from the cache).
    kept = [w for w in wheels if w.name in outcome.already and not (index / EVIDENCE / f"{w.name}.json").exists()]
    for evidence in gather_all(layout, kept, args.python):
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
