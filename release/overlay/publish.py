"""`publish DIST INDEX_DIR`: our wheels into a PEP 503 index directory, each with its evidence.

Every refusal comes before the index is written: a wheel that is not one, a wheel missing a fix its
release needs, a wheel whose evidence does not prove its fixes or goes backwards from what the index
holds; then the index, then the evidence files beside it (INDEX_DIR/evidence/<wheel>.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core import log
from release.core.errors import BadInputError
from release.core.journal import write_atomic
from release.core.text import escaped
from release.evidence.gather import gather_all, refuse, refuse_backwards
from release.evidence.record import EVIDENCE, EvidenceRecord, has_record, held_records
from release.overlay.attest import load_signer, sign_published
from release.overlay.build import PROJECT
from release.overlay.fixes import refuse_wheels_missing_fixes
from release.overlay.index import REQUIREMENTS, preflight, publish
from release.overlay.wheel import WheelReads
from release.queue.snapshot import Checkout

# Beside simple/ and requirements/: INDEX_DIR/evidence/<wheel>.json (EVIDENCE), what each published wheel proved,
# read back bounded and bound to its wheel by release/evidence/record.py.


@dataclass(frozen=True)
class PublishOptions:
    """What `publish` was asked (its arguments and options, one field each)."""

    dist: Path  # a directory of wheels, or one wheel
    index: Path  # the index directory (holds simple/)
    python: str | None  # the interpreter the evidence runs under (None: each line's proving environment)
    allow_dirty: bool = False  # publish a dirty build (`build --allow-dirty`) too
    signing_key: Path | None = None  # the ed25519 key that signs the evidence (else $VLLM_FUSED_MOE_SIGNING_KEY)


def held_evidence(index: Path, reads: WheelReads) -> list[EvidenceRecord]:
    """The evidence the index keeps beside its wheels (INDEX_DIR/evidence/<wheel>.json), each bound to the wheel
    the index holds under its name (read once, by `reads`; release/evidence/record.py); any other file there
    proves nothing, and is said (docs/guarantees.md)."""
    project_dir = index / "simple" / PROJECT

    def held(name: str) -> str | None:
        path = project_dir / name
        return reads(path).sha256 if path.is_file() else None

    records, problems = held_records(index, held)
    for problem in problems:
        # escaped: the problem names a file of the index, whose name may hold any byte but / and NUL
        log.note(escaped(f"note: {problem}: it proves nothing (a publish of that wheel writes its own evidence)"))
    return records


def publish_wheels(checkout: Checkout, options: PublishOptions) -> int:
    """`checkout`: read once, under the repository lock, by the command (release/overlay/publish_cli.py)."""
    dist = options.dist
    wheels = sorted(dist.glob("*.whl")) if dist.is_dir() else [dist]
    if not wheels or not wheels[0].exists():
        raise BadInputError(f"no wheel in {dist}", hint="build one with `python -m release build` (nox -s build)")
    # Each wheel read once (release/overlay/wheel.py), for every stage below: a FIFO, a device, a directory or a
    # huge file is refused before any read.
    reads = WheelReads()
    given = [reads(wheel) for wheel in wheels]
    index = options.index.resolve()
    signer = load_signer(options.signing_key)  # issue 47: an unusable key is refused before anything is done
    # A wheel for a release affected by a bug it carries no fix for would be installed as the fix.
    refuse_wheels_missing_fixes(checkout, given)
    # Evidence, not records: each bug's test fails on the wheel's pristine release and passes with the wheel;
    # gathered for the wheels the publish would add, after every cheaper refusal.
    held = held_evidence(index, reads)
    proofs = gather_all(
        checkout,
        preflight(wheels, index, project=PROJECT, allow_dirty=options.allow_dirty, reads=reads),
        options.python,
    )
    for evidence in proofs:
        refuse(evidence, f"not publishing {evidence.wheel}")
        refuse_backwards(evidence, held, f"not publishing {evidence.wheel}")
    outcome = publish(wheels, index, project=PROJECT, allow_dirty=options.allow_dirty, reads=reads)
    # A wheel a killed publish left in the index without its evidence file gets it now (from the cache).
    kept = [w for w in given if w.name in outcome.already and not has_record(index, w.name, w.sha256)]
    for evidence in gather_all(checkout, kept, options.python):
        refuse(evidence, f"{evidence.wheel} is in the index, but")
        proofs.append(evidence)
    if proofs:
        (index / EVIDENCE).mkdir(exist_ok=True)
    for evidence in proofs:
        if evidence.wheel in outcome.added or evidence.wheel in outcome.already:
            write_atomic(index / EVIDENCE / f"{evidence.wheel}.json", evidence.text())
    # issue 47: each evidence file's signed in-toto attestation (release/overlay/attest.py), from the file as written.
    done = set(outcome.added) | set(outcome.already)
    signed = sign_published(index / EVIDENCE, {w.name: w.sha256 for w in given if w.name in done}, signer)
    for line in outcome.repaired:
        log.note(f"note: {line}")
    for name in outcome.added:
        log.out(f"published {name}")
    for name in outcome.already:
        log.out(f"already published (same bytes) {name}")
    for skipped in outcome.skipped:
        log.out(f"skipped {skipped.name}: {skipped.reason()}")
    for name in signed:
        log.out(f"signed {EVIDENCE}/{name}")
    for path in outcome.requirements:
        log.out(f"wrote {path}")
    log.out(f"index: file://{(index / 'simple').as_posix()}")
    log.out(f"requirements: file://{(index / REQUIREMENTS).as_posix()}/vllm-X.txt, one per vLLM release X")
    log.out(
        f"install: python -m pip install --no-index --find-links URL/simple/{PROJECT}/ "
        "-r URL/requirements/vllm-X.txt (URL: where INDEX_DIR is served; docs/overlay.md, 'Install')"
    )
    return 0
