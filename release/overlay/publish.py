"""`publish DIST INDEX_DIR`: our wheels into a PEP 503 index directory, each with its evidence.

Every refusal comes before the index is written: a wheel that is not one, a wheel missing a fix its
release needs, a checkout that `check`'s gates refuse (the same gates, release/queue/status.py), a wheel
that is not byte for byte the tool's own build of its tag (release/overlay/rebuild.py), a wheel whose
evidence does not prove every bug any record names for its release (three runs per bug: pristine, the
wheel, the wheel built without the fix, release/overlay/without.py) or goes backwards from what the index
holds; then the index, then the evidence files beside it (INDEX_DIR/evidence/<wheel>.json).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from release.core import log
from release.core.errors import BadInputError, DriftError
from release.core.journal import write_atomic
from release.core.text import escaped
from release.evidence import progress
from release.evidence.gather import Evidence, gather_all, refuse, refuse_backwards, wheel_release
from release.evidence.record import EVIDENCE, EvidenceRecord, has_record, held_records
from release.model.wheel import OverlayWheel
from release.overlay.attest import load_signer, sign_published
from release.overlay.build import PROJECT
from release.overlay.fixes import carried_bugs, refuse_wheels_missing_fixes
from release.overlay.index import REQUIREMENTS, preflight, publish
from release.overlay.rebuild import References, origins
from release.overlay.wheel import WheelReads
from release.overlay.without import Without
from release.queue.snapshot import Checkout
from release.queue.status import check

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


def records_of(wheels: list[OverlayWheel], held: list[EvidenceRecord]) -> dict[str, dict[str, list[str]]]:
    """Per wheel, {bug: [where recorded]} from the records outside the checkout: the wheel's own build facts
    (the patches it carries) and the index's evidence of the same release (a bug an earlier level fixed or
    recorded). patches/train.toml and the scan data are gather's to read."""
    found: dict[str, dict[str, list[str]]] = {}
    for wheel in wheels:
        bugs: dict[str, list[str]] = {}
        info = wheel.build_info
        for bug in sorted(carried_bugs(info) if info is not None else set()):
            bugs.setdefault(bug, []).append("the wheel's build facts")
        version = wheel_release(wheel.path)
        for old in held:
            if old.vllm_version != version:
                continue
            for held_bug in old.bugs:
                if held_bug.verdict == "fixed" or held_bug.recorded:
                    bugs.setdefault(held_bug.bug, []).append(f"the index's evidence of {old.wheel}")
        found[wheel.name] = bugs
    return found


def refuse_as_check(checkout: Checkout, wheels: list[OverlayWheel], allow_dirty: bool) -> None:
    """`check`'s gates, the same function: a queue `check` refuses is not published from, its per-tag gates held for
    the tags of `wheels` (with --allow-dirty, a vendor/ that drifted is the dirt it allows; every other gate holds)."""
    drifted = check(checkout, tags={f"v{wheel_release(wheel.path)}" for wheel in wheels})
    if drifted and not allow_dirty:
        raise DriftError(
            f"vendor/ drifted from pristine + series in {len(drifted)} file(s) (`python -m release check` lists "
            "them); nothing was published"
        )


def prove(
    checkout: Checkout,
    wheels: list[OverlayWheel],
    options: PublishOptions,
    held: list[EvidenceRecord],
    stack: ExitStack,
    workers: int | None = None,
) -> list[Evidence]:
    """Each wheel proven to be the checkout's build (the commit its build facts name, rebuilt), then its evidence
    (three runs per bug); `workers` wheels at a time (gather_all's default: one per core)."""
    if not wheels:
        return []
    made = origins(checkout.layout, wheels, options.allow_dirty)  # a wheel that names no build of this checkout
    references = stack.enter_context(References(checkout.layout))
    # Before any test runs: a wheel that is not the checkout's build runs nothing. Said, with the heartbeat, as the
    # runs are: the builds at each commit take seconds to minutes (issue 44: no silence over 10 s on a terminal).
    with progress.heartbeat("rebuild"):
        progress.timed(
            f"rebuild: {len(made)} wheel(s) built again where they say they were built",
            partial(references.verify, made),
            lambda _: "byte for byte the same",
        )
    without = Without(references, {m.wheel.name: m for m in made}, stack)
    return gather_all(checkout, wheels, options.python, workers, without=without, records=records_of(wheels, held))


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
    # Evidence, not records: each bug's test fails on the wheel's pristine release, passes with the wheel and fails
    # with the wheel built without the fix; gathered for the wheels the publish would add, after every cheaper refusal.
    held = held_evidence(index, reads)
    adding = preflight(wheels, index, project=PROJECT, allow_dirty=options.allow_dirty, reads=reads)
    origins(checkout.layout, adding, options.allow_dirty)  # a wheel that names no build of this checkout: first
    refuse_as_check(checkout, given, options.allow_dirty)
    with ExitStack() as stack:
        proofs = prove(checkout, adding, options, held, stack)
        for evidence in proofs:
            refuse(evidence, f"not publishing {evidence.wheel}")
            refuse_backwards(evidence, held, f"not publishing {evidence.wheel}")
        outcome = publish(wheels, index, project=PROJECT, allow_dirty=options.allow_dirty, reads=reads)
        # A wheel a killed publish left in the index without its evidence file gets it now (from the cache).
        kept = [w for w in given if w.name in outcome.already and not has_record(index, w.name, w.sha256)]
        for evidence in prove(checkout, kept, options, held, stack):
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
