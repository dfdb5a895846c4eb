"""`python -m release publish DIST INDEX_DIR`: add our wheels to a PEP 503 index directory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from release.core import log
from release.core.errors import BadInputError
from release.core.files import WHEEL_LIMIT, read_regular
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
        f"Add the {PROJECT} wheels in DIST (a directory or one .whl) to the PEP 503 simple index in "
        "INDEX_DIR (created with its missing parents), and write INDEX_DIR/requirements/vllm-X.txt for "
        "each vLLM release X: our newest wheel for X, pinned by version and sha256, which is what users "
        "install (docs/overlay.md, 'Install'). A wheel of any other project is refused (users install "
        "from this index with --index-url: whatever else it held would be installed as the real thing). "
        "Earlier releases stay; rerunning is a no-op; a wheel whose files equal those of the wheel the "
        "index holds for its vLLM release, apart from build information (commit, build time), is "
        "skipped and said so; a file of the same name with other contents is refused and the index is "
        "left unchanged. What an interrupted publish left (temporary files, a page or requirements "
        "file that misses a renamed wheel or is truncated) is repaired first and reported; what no "
        "publish leaves (a listed file gone or changed, a stray file) is refused. Refused too (exit 2, "
        "nothing published): a wheel for a vLLM release that has a bug none of its patches fixes "
        "(patches/train.toml records each train tag's bugs; the scan data, affected-releases.json, adds its "
        "findings): it would be installed as the newest patch level; a wheel carrying a release line's "
        "variant that `pq carry` made from another version of its common patch than patches/ holds (stale); "
        "a wheel at or below the newest patch level the index holds for its vLLM release whose files differ "
        "(a tag's patch level only goes up: the requirements file pins the newest); a dirty build, unless "
        "--allow-dirty. Every wheel is read as a regular file (a link to one is followed) of at most "
        f"{WHEEL_LIMIT >> 30} GiB: a FIFO, a device (/dev/zero), a directory or a larger file is refused "
        "(exit 2) before anything is read. Evidence, not records (release/evidence): each bug's regression test "
        "(patches/upstream-tests/, per release line) runs on the wheel's pristine vLLM release, which must fail "
        "cleanly (the release has the bug; a clean pass: it has not), and with the wheel installed beside it by "
        "pip, which must pass cleanly; an error, a skip or nothing collected is no evidence. The vLLM release is "
        "the wheel's version (X of X+fm.N), never its _build_info.json. A wheel without that evidence, one whose "
        "records say its release has a bug its test does not show, or one that fixes fewer bugs than a level the "
        "index holds for its release is refused (exit 2, naming the bug, the tag and the line; the index "
        "unchanged). Each run is cached by every input (~/.cache/vllm-fused-moe/evidence); what a published "
        "wheel proved is kept as INDEX_DIR/evidence/<wheel>.json. One publish at a "
        "time per index (a lock in INDEX_DIR). Serve INDEX_DIR over HTTPS (or "
        "`python -m http.server --bind 127.0.0.1 --directory INDEX_DIR` on one machine); install with "
        f"pip install --no-index --find-links URL/simple/{PROJECT}/ -r URL/requirements/vllm-X.txt"
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
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
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
