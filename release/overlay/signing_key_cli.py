"""`python -m release signing-key [--key FILE | --generate FILE]`: the evidence signing key's fingerprint.

The stage is release/overlay/attest.py (which signs); this command prints what an operator pins.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from release.core import log
from release.core.errors import SigningKeyError
from release.core.layout import Layout
from release.overlay.attest import SIGNING_KEY_ENV, fingerprint, load_signer, new_key_pem, public_hex


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print the public key and the fingerprint (securesystemslib's keyid: the sha256 of the public key's "
        "canonical JSON) of the ed25519 key that `publish --signing-key` signs the evidence with: what an "
        "operator pins for the doctor (`vllm-fused-moe doctor --evidence-key ed25519:HEX`; docs/overlay.md, "
        f"'Signed evidence'). The key: --key FILE, else the PEM text in ${SIGNING_KEY_ENV}."
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--key", type=Path, metavar="FILE", help="the PEM (PKCS#8) ed25519 private key")
    which.add_argument(
        "--generate",
        type=Path,
        metavar="FILE",
        help="write a new ed25519 private key to FILE (mode 0600; an existing FILE is refused), then print it",
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    path = args.key
    if args.generate is not None:
        try:
            # O_EXCL: never over a key someone keeps; 0600: a private key is for its owner alone.
            fd = os.open(args.generate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise SigningKeyError(f"cannot write a new key to {args.generate}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(new_key_pem())
        path = args.generate
    signer = load_signer(path)
    if signer is None:
        raise SigningKeyError(f"no key: give --key FILE, --generate FILE or set ${SIGNING_KEY_ENV}")
    log.out(f"public key   ed25519:{public_hex(signer)}")
    log.out(f"fingerprint  {fingerprint(signer)}")
    return 0
