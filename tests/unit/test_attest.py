"""The signing side of issue 47 in-process: what publish signs, which keys it takes, and what it never prints.

The whole path (a real server, the installs, the doctor's findings) is tests/e2e/test_index_server.py; here
what needs no server: the statement made from an evidence file, the refusals before anything is signed, the
doctor's own reading of a key agreeing with securesystemslib's fingerprint, and the redaction of credentials.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from securesystemslib.signer import CryptoSigner  # type: ignore[attr-defined]

from helpers.doctor import doctor_module
from release.core.errors import AttestationError, SigningKeyError
from release.core.hashing import sha256_hex
from release.overlay import attest
from release.overlay.upload import redact

WHEEL = "vllm_fused_moe-1.0+fm.1-py3-none-any.whl"


def signer(tmp_path: Path) -> CryptoSigner:
    (tmp_path / "key.pem").write_bytes(attest.new_key_pem())
    found = attest.load_signer(tmp_path / "key.pem")
    assert found is not None
    return found


def evidence(directory: Path, wheel: str = WHEEL, sha256: str = "ab" * 32) -> Path:
    record = {
        "wheel": {"name": wheel, "sha256": sha256},
        "vllm": {"tag": "v1.0", "wheel": "vllm-1.0-py3-none-any.whl", "sha256": "cd" * 32},
        "tool": {"commit": "12" * 20, "digest": "sha256:" + "34" * 32},
        "bugs": [
            {"bug": "B", "test": "tests/t.py", "test_sha256": "ef" * 32, "verdict": "fixed",
             "pristine": {"result": "failed"}, "wheel": {"result": "passed"}, "no_patch": {"result": "error"}},
        ],
    }  # fmt: skip
    path = directory / f"{wheel}.json"
    path.write_text(json.dumps(record))
    return path


def test_the_statement_names_the_wheel_its_inputs_and_each_run(tmp_path: Path) -> None:
    source = evidence(tmp_path)
    written = attest.attest(tmp_path, {WHEEL: "ab" * 32}, signer(tmp_path))
    assert written == [f"{WHEEL}{attest.SUFFIX}"]
    statement = attest.payload_of((tmp_path / written[0]).read_bytes())
    assert statement["subject"] == [{"name": WHEEL, "digest": {"sha256": "ab" * 32}}]
    predicate = statement["predicate"]
    digests = {c["name"]: c["digest"] for c in predicate["configuration"]}
    assert digests["vllm-1.0-py3-none-any.whl"] == {"sha256": "cd" * 32}
    assert digests["tests/t.py"] == {"sha256": "ef" * 32}
    assert digests["vllm-fused-moe-tooling"] == {"gitCommit": "12" * 20, "sha256": "34" * 32}
    assert digests[f"evidence/{source.name}"]["sha256"] == sha256_hex(source.read_bytes())
    assert predicate["result"] == "PASSED"
    assert predicate["passedTests"] == ["B tests/t.py [wheel on vLLM v1.0]"]
    failed = ["B tests/t.py [pristine on vLLM v1.0]", "B tests/t.py [no_patch on vLLM v1.0]: error"]
    assert predicate["failedTests"] == failed


def test_a_second_attest_with_the_same_key_writes_nothing(tmp_path: Path) -> None:  # ed25519 signs deterministically
    evidence(tmp_path)
    key = signer(tmp_path)
    assert attest.attest(tmp_path, {WHEEL: "ab" * 32}, key)
    assert attest.attest(tmp_path, {WHEEL: "ab" * 32}, key) == []


def test_evidence_of_another_wheel_is_never_signed(tmp_path: Path) -> None:
    evidence(tmp_path, sha256="99" * 32)
    with pytest.raises(AttestationError, match="not the evidence of"):
        attest.attest(tmp_path, {WHEEL: "ab" * 32}, signer(tmp_path))
    assert not (tmp_path / f"{WHEEL}{attest.SUFFIX}").exists()


def test_a_key_that_is_not_an_unencrypted_ed25519_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    plain, locked = tmp_path / "ec.pem", tmp_path / "locked.pem"
    plain.write_bytes(other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))  # fmt: skip
    locked.write_bytes(other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.BestAvailableEncryption(b"pw")))  # fmt: skip
    with pytest.raises(SigningKeyError, match="not an ed25519 key"):
        attest.load_signer(plain)
    with pytest.raises(SigningKeyError, match="not an unencrypted PEM"):
        attest.load_signer(locked)
    monkeypatch.setenv(attest.SIGNING_KEY_ENV, "not a key")
    with pytest.raises(SigningKeyError) as refused:
        attest.load_signer(None)
    assert "not a key" not in str(refused.value)  # the variable's text, a secret, is never echoed
    monkeypatch.setenv(attest.SIGNING_KEY_ENV, " ")
    assert attest.load_signer(None) is None  # an empty secret (a fork's CI): no key, not an error


def test_the_doctor_reads_a_key_as_securesystemslib_fingerprints_it(tmp_path: Path) -> None:
    key = signer(tmp_path)
    runtime = doctor_module().attestation
    public_pem = key.public_key.keyval["public"]
    pem = serialization.load_pem_private_key(attest.new_key_pem(), None)  # another key, in its PEM form
    assert runtime.keyid(public_pem) == attest.fingerprint(key)
    assert runtime.parse_key(f"ed25519:{public_pem}") == runtime.parse_key(public_pem.upper()) == public_pem
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    other_pem = pem.public_key().public_bytes(serialization.Encoding.PEM, spki)
    raw = pem.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert runtime.parse_key(other_pem.decode()) == raw.hex()
    assert runtime.parse_key("ed25519:" + "0" * 63) is None


def test_credentials_are_redacted_from_what_is_printed() -> None:
    said = redact("403 Forbidden from https://maint:s3cret@pypi.example.com/ for s3cret", "s3cret")
    assert said == "403 Forbidden from https://***@pypi.example.com/ for ***"
    assert redact("https://pypi.example.com/simple/") == "https://pypi.example.com/simple/"
