"""A line's `skip` of a bug's patch is a claim that needs proof: the bug's regression test passes cleanly on
the line's pristine release. `check` and `train add` read that proof; they never make it.

They run under the tooling's interpreter, which has no torch, so they cannot run the test. The proof
is made under one that has (`python -m release evidence --line L | --tag T --python PY`, the nox
`evidence` session: release/evidence/skips.py) and kept in the evidence cache, one JSON per (vLLM
release, line, test, tool): `<cache>/evidence/skips/<key>.json`, the key the sha256 of the release's
version, the line, the test's path and digest and the digest of the evidence stage's own code. The
record names the release wheel's sha256 it ran on, which must be the one patches/train.toml records
for the tag (where it records one). Only a clean pass is written; a change of the test or of the
tool makes every proof stale, so nothing vacuous or stale stands for a run. A proof carries the MAC the
tool gave it under the cache's secret (release/core/seal.py): one written by anything else (a hostile
test writing proofs for the genuine test, a hand edit) proves nothing. A `Downstream:` patch's skip needs none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.core.errors import BadInputError, UnprovenSkipError
from release.core.files import read_regular
from release.core.hashing import code_digest, sha256_hex
from release.core.parse import parse_json
from release.core.seal import is_sealed
from release.core.versions import version_of_tag
from release.model.series import EntryKind
from release.queue.regression import BugTest, refuse_untested, upstream_test
from release.queue.snapshot import Checkout

PASSED = "passed"  # release/evidence/runner.py's clean pass
PROOF_LIMIT = 1 << 20
EVIDENCE_CODE = Path(__file__).resolve().parent.parent / "evidence"


def tool_digest() -> str:
    """sha256 over the evidence stage's own code (release/evidence/*.py): a change in how evidence is
    gathered makes every run, and every skip's proof, stale."""
    return "sha256:" + code_digest(EVIDENCE_CODE, list(EVIDENCE_CODE.glob("*.py")))


def cache_root() -> Path:
    # Imported here: the release reader brings `requests`, which `check --help` must not load
    # (tests/cli/test_install.py); only a check that reads a proof needs the cache's place.
    from release.pristine.wheel import cache_dir

    return cache_dir().parent


def proofs_dir() -> Path:
    return cache_root() / "evidence" / "skips"


def proof_key(version: str, test: BugTest, tool: str) -> str:
    return sha256_hex("\0".join(("skip", version, test.line, test.path, test.digest, tool)).encode())


def proof_path(version: str, test: BugTest, tool: str | None = None) -> Path:
    return proofs_dir() / f"{proof_key(version, test, tool or tool_digest())}.json"


def skipped_bug_tests(checkout: Checkout, line: str) -> list[BugTest]:
    """The bugs whose patch `line`'s series skips, each with the line's regression test of it (refused
    when a bug patch names none), from the checkout as the command read it."""
    own = next((candidate for candidate in checkout.own_lines() if candidate.name == line), None)
    skipped = {e.name for e, _ in checkout.entries(own) if e.kind == EntryKind.SKIP} if own is not None else set()
    if not skipped:
        return []  # most lines skip nothing
    found = []
    for patch in checkout.bug_patches():
        if patch.name not in skipped:
            continue
        test = upstream_test(checkout.layout, patch, line)
        if test is None:
            refuse_untested(checkout.layout, [patch], f"line {line} skips {patch.name}")
            continue
        found.append(BugTest(patch.purpose.bug, patch.purpose.title, patch.name, line, test[0], test[1]))
    return found


@dataclass(frozen=True)
class Unproven:
    test: BugTest
    why: str


def read_proof(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = parse_json(read_regular(path, PROOF_LIMIT, follow_links=False), where=str(path))
    except BadInputError:
        return None
    return data if isinstance(data, dict) else None


def unproven_skips(checkout: Checkout, tag: str, line: str, release_sha256: str = "") -> list[Unproven]:
    """The bugs `line` skips whose skip has no proof for release `tag` (on the wheel `release_sha256`, when known)."""
    tests = skipped_bug_tests(checkout, line)
    if not tests:
        return []
    version, tool = version_of_tag(tag), tool_digest()
    found = []
    for test in tests:
        path = proof_path(version, test, tool)
        proof = read_proof(path)
        if proof is None:
            found.append(Unproven(test, "no run of its test on the pristine release proves it"))
        elif proof.get("key") != proof_key(version, test, tool) or proof.get("result") != PASSED:
            found.append(Unproven(test, f"{path} is no clean pass of its test"))
        elif not is_sealed(cache_root(), proof):
            found.append(Unproven(test, f"{path} was not written by `python -m release evidence` (no valid MAC)"))
        elif release_sha256 and proof.get("vllm", {}).get("sha256") != release_sha256:
            found.append(
                Unproven(test, f"its proof ran on another release wheel than patches/train.toml records ({path})")
            )
    return found


def refuse_unproven_skips(checkout: Checkout, what: str, tag: str, line: str, release_sha256: str = "") -> None:
    unproven = unproven_skips(checkout, tag, line, release_sha256)
    if not unproven:
        return
    said = [
        f"bug {u.test.bug}" + (f" ({u.test.title})" if u.test.title else "") + f" on vLLM {tag} (line {line}): "
        f"the line's series skips {u.test.patch}, but {u.why} (test {u.test.path})"
        for u in unproven
    ]
    raise UnprovenSkipError(what=what, skips=said, tag=tag, line=line, patch=unproven[0].test.patch)
