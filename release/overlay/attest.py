"""A wheel's evidence as an in-toto Test Result statement in a DSSE envelope, signed offline with ed25519.

`publish` writes INDEX_DIR/evidence/<wheel>.json (what the wheel proved); beside it this module writes
INDEX_DIR/evidence/<wheel>.intoto.jsonl: one line, a DSSE envelope (payload type
`application/vnd.in-toto+json`) of an in-toto Statement v1 whose predicate is
`https://in-toto.io/attestation/test-result/v0.1`:

- subject: the wheel's file name and sha256;
- configuration: the vLLM release wheel (sha256), each regression test (path, sha256), the tool
  (the commit it ran from, `gitCommit`, and its code digest) and the evidence JSON itself (sha256);
- result PASSED where every bug is `fixed` or `not affected`, else FAILED; each run of each bug's test
  (on the pristine release, with the wheel, ...) is a passed or a failed test, named after the run.

The statement is made from the evidence JSON's bytes as written, so the signature covers the file an
operator reads. securesystemslib signs (DSSE's pre-authentication encoding, its `keyid`): a
well-kept implementation rather than ours. The doctor verifies with its own few lines
(runtime/vllm_fused_moe/_doctor/attestation.py), since it runs where securesystemslib is not installed.

The key: a PEM (PKCS#8) ed25519 private key, from `--signing-key FILE` or the environment variable
SIGNING_KEY_ENV (its PEM text; CI takes it from a secret). Its fingerprint is securesystemslib's keyid,
the sha256 of the public key's canonical JSON: `python -m release signing-key` prints it.

In release/overlay (publish's stage), not release/evidence: the evidence cache keys every run by the digest
of release/evidence/*.py, and how a proof is signed changes no run.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope

# The package's documented name; its __init__ imports it without re-exporting it, which mypy --strict flags.
from securesystemslib.signer import CryptoSigner  # type: ignore[attr-defined]

from release.core import log
from release.core.errors import AttestationError, BadInputError, SigningKeyError
from release.core.files import read_regular
from release.core.hashing import sha256_hex
from release.core.journal import write_atomic
from release.core.parse import parse_json

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
SUFFIX = ".intoto.jsonl"
SIGNING_KEY_ENV = "VLLM_FUSED_MOE_SIGNING_KEY"
KEY_LIMIT = 64 << 10  # a PEM ed25519 key is 119 bytes
EVIDENCE_LIMIT = 1 << 20  # as publish and the doctor bound the evidence JSON
RUN_KEYS = ("pristine", "wheel")  # the runs every bug has, in this order; any other run follows by name
PASSED, FAILED = "passed", "failed"  # the runner's words (release/evidence/runner.py)
PROVEN = ("fixed", "not affected")  # the verdicts publish accepts (release/evidence/gather.py)


def load_signer(path: Path | None) -> CryptoSigner | None:
    """The signer of `path`, else of SIGNING_KEY_ENV's PEM text, else None (no key given)."""
    if path is not None:
        try:
            pem = read_regular(path, KEY_LIMIT)
        except BadInputError as exc:
            raise SigningKeyError(f"the signing key {path} cannot be read: {exc}") from None
        where = str(path)
    elif os.environ.get(SIGNING_KEY_ENV, "").strip():
        pem, where = os.environ[SIGNING_KEY_ENV].encode(), f"${SIGNING_KEY_ENV}"
    else:
        return None
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        # TypeError: an encrypted key; ValueError: no PEM, or not a key. Neither message holds key bytes.
        raise SigningKeyError(f"{where} is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{where} is a {type(key).__name__.removeprefix('_')}, not an ed25519 key")
    return CryptoSigner(key)


def public_hex(signer: CryptoSigner) -> str:
    return str(signer.public_key.keyval["public"])


def fingerprint(signer: CryptoSigner) -> str:
    """securesystemslib's keyid of the public key: the sha256 of its canonical JSON (what DSSE names)."""
    return str(signer.public_key.keyid)


def new_key_pem() -> bytes:
    """A fresh ed25519 private key, PEM PKCS#8 (what `openssl genpkey -algorithm ed25519` writes)."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def statement(record: dict[str, Any], evidence_text: bytes, evidence_name: str) -> dict[str, Any]:
    """The in-toto Test Result statement of one wheel's evidence record (and that record's bytes)."""
    wheel = record.get("wheel") or {}
    vllm = record.get("vllm") or {}
    tool = record.get("tool") or {}
    bugs = [b for b in record.get("bugs") or [] if isinstance(b, dict)]
    configuration: list[dict[str, Any]] = []
    if vllm.get("sha256"):
        configuration.append(
            {"name": str(vllm.get("wheel") or vllm.get("tag")), "digest": {"sha256": vllm["sha256"]},
             "annotations": {"role": "vllm-release-wheel", "tag": str(vllm.get("tag") or "")}}
        )  # fmt: skip
    seen: set[str] = set()
    for bug in bugs:
        test = str(bug.get("test") or "")
        if test and test not in seen and bug.get("test_sha256"):
            seen.add(test)
            configuration.append(
                {"name": test, "digest": {"sha256": str(bug["test_sha256"])},
                 "annotations": {"role": "regression-test", "bug": str(bug.get("bug"))}}
            )  # fmt: skip
    tool_digest = {"gitCommit": str(tool["commit"])} if tool.get("commit") else {}
    if str(tool.get("digest") or "").startswith("sha256:"):
        tool_digest["sha256"] = str(tool["digest"]).removeprefix("sha256:")
    if tool_digest:
        configuration.append({"name": "vllm-fused-moe-tooling", "digest": tool_digest, "annotations": {"role": "tool"}})
    configuration.append(
        {"name": evidence_name, "digest": {"sha256": sha256_hex(evidence_text)}, "annotations": {"role": "evidence"}}
    )
    passed, failed = runs(bugs, str(vllm.get("tag") or ""))
    proven = all(b.get("verdict") in PROVEN for b in bugs)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": str(wheel.get("name")), "digest": {"sha256": str(wheel.get("sha256"))}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "result": "PASSED" if proven else "FAILED",
            "configuration": configuration,
            "passedTests": passed,
            "warnedTests": [],
            "failedTests": failed,
        },
    }


def runs(bugs: list[dict[str, Any]], tag: str) -> tuple[list[str], list[str]]:
    """Each run of each bug's test, named `BUG TEST [RUN on TAG]`, as (passed, failed); an error is a failure."""
    passed: list[str] = []
    failed: list[str] = []
    for bug in bugs:
        names = [k for k in RUN_KEYS if isinstance(bug.get(k), dict)]
        names += sorted(k for k, v in bug.items() if k not in RUN_KEYS and isinstance(v, dict) and "result" in v)
        for name in names:
            result = bug[name].get("result")
            label = f"{bug.get('bug')} {bug.get('test')} [{name} on vLLM {tag}]"
            (passed if result == PASSED else failed).append(
                label if result in (PASSED, FAILED) else f"{label}: {result}"
            )
    return passed, failed


def envelope_line(payload: dict[str, Any], signer: CryptoSigner) -> bytes:
    """The statement in a DSSE envelope signed by `signer`, as one JSON line (ed25519 is deterministic)."""
    envelope = Envelope(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode(), PAYLOAD_TYPE, {})
    envelope.sign(signer)
    return (json.dumps(envelope.to_dict(), sort_keys=True, separators=(",", ":")) + "\n").encode()


def attest(evidence_dir: Path, wheels: dict[str, str], signer: CryptoSigner) -> list[str]:
    """Write evidence/<wheel>.intoto.jsonl for each wheel {name: sha256} whose evidence JSON is there.

    The statement is made from the JSON on disk; one whose `wheel` is not that wheel (name and sha256)
    is refused, never signed. Returns the files written (an unchanged one is not rewritten).
    """
    written = []
    for name, sha256 in sorted(wheels.items()):
        source = evidence_dir / f"{name}.json"
        if not source.is_file():
            continue
        text = read_regular(source, EVIDENCE_LIMIT, follow_links=False)
        record = parse_json(text, where=f"{source} (not signed)", error=AttestationError)
        held = record.get("wheel") if isinstance(record, dict) else None
        if not isinstance(held, dict) or (held.get("name"), held.get("sha256")) != (name, sha256):
            raise AttestationError(f"{source} is not the evidence of {name} (sha256 {sha256}); not signed")
        line = envelope_line(statement(record, text, f"evidence/{source.name}"), signer)
        target = evidence_dir / f"{name}{SUFFIX}"
        if not target.is_file() or target.read_bytes() != line:
            write_atomic(target, line)
            written.append(target.name)
    return written


def sign_published(evidence_dir: Path, wheels: dict[str, str], signer: CryptoSigner | None) -> list[str]:
    """`attest` where a key was given; without one, a note that the evidence stays unsigned."""
    if signer is None:
        if wheels:
            log.note(
                f"note: no signing key (--signing-key FILE or ${SIGNING_KEY_ENV}): the evidence is not signed, and a "
                "doctor that pins a key reports it missing"
            )
        return []
    return attest(evidence_dir, wheels, signer)


def payload_of(line: bytes) -> dict[str, Any]:
    """The statement of an envelope line, not verified (what a reader of the file sees)."""
    envelope = parse_json(line, where="an attestation line", error=AttestationError)
    payload = envelope.get("payload") if isinstance(envelope, dict) else None
    if not isinstance(payload, str):
        raise AttestationError("an attestation line has no payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except ValueError:
        raise AttestationError("an attestation's payload is not base64") from None
    data = parse_json(raw, where="an attestation's payload", error=AttestationError)
    if not isinstance(data, dict):
        raise AttestationError("an attestation's payload is not a statement")
    return data
