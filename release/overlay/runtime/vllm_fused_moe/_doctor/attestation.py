"""The installed wheel's signed evidence: `evidence/<wheel>.intoto.jsonl`, verified against the key the operator pins.

`publish --signing-key` writes beside each wheel's evidence JSON a DSSE envelope of an in-toto Test
Result statement (release/overlay/attest.py). The doctor reads it from the same place as the JSON
(--index-url: the URL where publish's INDEX_DIR is served) and checks, in order: it is there; it is
signed; a signature verifies with the pinned key; the statement's subject is the installed wheel (its
name, and the sha256 the evidence JSON names); it signs the evidence JSON read (its sha256). The first
that fails is the finding, by name (`status`): missing, not-read, malformed, unsigned, no-key, foreign-key,
bad-signature, other-wheel, other-evidence, cannot-verify. `verified` is the one good outcome.

The pinned key: --evidence-key, else $KEY_ENV, else the file CONFIG_NAME under $XDG_CONFIG_HOME (~/.config):
`ed25519:<64 hex>` (what `python -m release signing-key` prints), or a file holding that or a PEM public key.
Its fingerprint is securesystemslib's keyid: the sha256 of the key's canonical JSON, computed here.

Verifying ed25519 needs `cryptography`, imported only here and only then. vLLM's dependency tree has it
(vllm 0.20.0 -> mcp -> pyjwt[crypto] -> cryptography; docs/doctor.md, "Signed evidence"), and the doctor
adds no dependency of its own: where it is missing the finding is `cannot-verify` ("install
cryptography"), never a silent pass.
Stdlib otherwise, Python 3.10+.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .records import AttestationRead
from .verdict import index_base

KEY_ENV = "VLLM_FUSED_MOE_EVIDENCE_KEY"
CONFIG_NAME = "vllm-fused-moe/evidence-key"
SUFFIX = ".intoto.jsonl"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
LIMIT = 1 << 20
KEY_LIMIT = 64 << 10
TIMEOUT_S = 10.0
# DER SubjectPublicKeyInfo of an ed25519 key: this prefix, then the 32 bytes of the key (RFC 8410).
SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
Finding = Callable[..., AttestationRead]  # (status, problem, **what was found) -> the record


def keyid(public_hex: str) -> str:
    """securesystemslib's keyid of an ed25519 public key: sha256 of its canonical JSON (plain ASCII here)."""
    key = {"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": public_hex}}
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def parse_key(text: str) -> str | None:
    """The 64-hex public key of `ed25519:HEX`, bare HEX or a PEM public key; None if it is none of those."""
    text = text.strip()
    if "-----BEGIN PUBLIC KEY-----" in text:
        body = "".join(line for line in text.splitlines() if line and not line.startswith("-----"))
        try:
            der = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return None
        return der[len(SPKI_PREFIX) :].hex() if der.startswith(SPKI_PREFIX) and len(der) == 44 else None
    text = text.removeprefix("ed25519:").lower()
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def pinned_key(given: str | None) -> tuple[str | None, str | None, str | None]:
    """(public key hex, where it was pinned, problem): --evidence-key, $KEY_ENV, the config file; all None if none."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / CONFIG_NAME
    for value, where in ((given, "--evidence-key"), (os.environ.get(KEY_ENV), f"${KEY_ENV}")):
        if value:
            text = value
            if parse_key(value) is None and Path(value).is_file():
                try:
                    text = Path(value).read_bytes()[:KEY_LIMIT].decode("utf-8", "replace")
                except OSError as exc:
                    return None, where, f"the pinned key {value} cannot be read: {exc}"
                where = f"{where} {value}"
            found = parse_key(text)
            return (found, where, None) if found else (None, where, "the pinned key is not an ed25519 public key")
    if config.is_file():
        found = parse_key(config.read_bytes()[:KEY_LIMIT].decode("utf-8", "replace"))
        return (
            (found, str(config), None) if found else (None, str(config), "the pinned key is not an ed25519 public key")
        )
    return None, None, None


def fetch(url: str, timeout: float) -> tuple[bytes | None, str | None]:
    """(body, None) or (None, why): bounded, over file://, http:// or https://."""
    if not url.startswith(("file://", "http://", "https://")):
        return None, "the index URL is not file://, http:// or https://"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # the schemes are checked above
            data: bytes = answer.read(LIMIT + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, f"not read: {getattr(exc, 'reason', None) or exc}"
    return (None, f"larger than {LIMIT} bytes") if len(data) > LIMIT else (data, None)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding, what the signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def verify_attestation(
    index_url: str, wheel: str, given_key: str | None = None, timeout: float = TIMEOUT_S
) -> AttestationRead:
    """The installed wheel's attestation, judged against the pinned key (see the module's docstring)."""
    base = index_base(index_url)
    url = f"{base}/evidence/{wheel}{SUFFIX}"
    public, pinned_from, key_problem = pinned_key(given_key)
    pinned = keyid(public) if public else None

    def finding(status: str, problem: str | None, **found: Any) -> AttestationRead:
        return AttestationRead(url, wheel, status, problem, pinned, pinned_from, **found)

    data, why = fetch(url, timeout)
    if data is None:
        missing = why and ("404" in why or "No such file" in why or "not found" in why.lower())
        return finding("missing" if missing else "not-read", f"no signed evidence: {why}")
    try:
        envelope = json.loads(data.decode("utf-8").strip().splitlines()[0])
        payload = base64.b64decode(envelope["payload"], validate=True)
        kind = str(envelope["payloadType"])
        signatures = [s for s in envelope.get("signatures") or [] if isinstance(s, dict)]
        statement = json.loads(payload)
        subject = statement["subject"][0]
        predicate = statement["predicate"]
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
        return finding("malformed", "not a DSSE envelope of an in-toto statement")
    signed_by = tuple(str(s.get("keyid") or "") for s in signatures)
    if (
        kind != PAYLOAD_TYPE
        or statement.get("_type") != STATEMENT_TYPE
        or statement.get("predicateType") != PREDICATE_TYPE
    ):
        return finding("malformed", f"not an in-toto test-result statement ({kind})", signed_by=signed_by)
    if not signatures:
        return finding("unsigned", "the envelope carries no signature", signed_by=signed_by)
    if key_problem or not public:
        why = key_problem or (
            f"no key pinned to verify it with (--evidence-key ed25519:HEX, ${KEY_ENV}, or ~/.config/{CONFIG_NAME})"
        )
        return finding("no-key", why, signed_by=signed_by)
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        return finding(
            "cannot-verify",
            "cannot verify: install cryptography (`python -m pip install cryptography`): vLLM does not bring it",
            signed_by=signed_by,
        )
    key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public))
    verified = False
    for signature in signatures:  # DSSE: a keyid is a hint; every signature is tried with the pinned key
        try:
            key.verify(base64.b64decode(str(signature.get("sig", "")), validate=True), pae(kind, payload))
            verified = True
            break
        except (InvalidSignature, binascii.Error, ValueError):
            continue
    if not verified:
        if pinned in signed_by:
            changed = "the signature does not verify with the pinned key: the envelope was changed"
            return finding("bad-signature", changed, signed_by=signed_by)
        shown = ", ".join(k[:16] for k in signed_by) or "no key id"
        foreign = f"signed by {shown}, not by the pinned key {pinned[:16] if pinned else ''}"
        return finding("foreign-key", foreign, signed_by=signed_by)
    name = str(subject.get("name"))
    sha256 = str((subject.get("digest") or {}).get("sha256"))
    found: dict[str, Any] = {"signed_by": signed_by, "verified_by": pinned, "subject": name, "subject_sha256": sha256,
             "result": str(predicate.get("result"))}  # fmt: skip
    if name != wheel:
        return finding("other-wheel", f"the attestation of {name}, not of {wheel}", **found)
    return check_evidence(finding, base, wheel, sha256, predicate, timeout, found)


def check_evidence(
    finding: Finding,
    base: str,
    wheel: str,
    sha256: str,
    predicate: dict[str, Any],
    timeout: float,
    found: dict[str, Any],
) -> AttestationRead:
    """The signed statement names the evidence JSON the index serves (its sha256) and that JSON's wheel sha256."""
    evidence_name = f"evidence/{wheel}.json"
    signed = [c for c in predicate.get("configuration") or [] if isinstance(c, dict) and c.get("name") == evidence_name]
    data, why = fetch(f"{base}/{evidence_name}", timeout)
    if data is None:
        return finding("other-evidence", f"the evidence JSON it signs is {why}", **found)
    digest = hashlib.sha256(data).hexdigest()
    if not signed or (signed[0].get("digest") or {}).get("sha256") != digest:
        return finding(
            "other-evidence", f"{evidence_name} (sha256 {digest[:16]}) is not the evidence it signs", **found
        )
    try:
        named = json.loads(data)["wheel"]["sha256"]
    except (ValueError, KeyError, TypeError):
        named = None
    if named != sha256:
        return finding("other-wheel", f"it signs the wheel sha256 {sha256[:16]}, the evidence names {named}", **found)
    return finding("verified", None, **found)
