"""A MAC over what the tool keeps in its cache: an entry is trusted only when the tool itself wrote it.

The evidence cache (release/evidence/cache.py), the skip proofs (release/queue/skip_proof.py) and the
rebuilt wheels' digests (release/overlay/rebuild.py) are plain files under the cache directory that any
process of the user can write. Each entry carries an HMAC-SHA256 of its canonical JSON under a secret
of the cache (`<cache>/secret`, 32 random bytes, created once with mode 0600 by an exclusive create); a
hand-edited entry, or one written by a process that does not hold the secret, is read as absent and
computed again. The standard library's `hmac` and `secrets`: no dependency is needed for one MAC.

What it does not stop (docs/guarantees.md, "The cache"): a process of the same user that reads the
secret file. The evidence runs never see the cache directory by name (their HOME and temp are their
own), but nothing but file permissions keeps a same-user process from it.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

SECRET_NAME = "secret"
SECRET_BYTES = 32
MAC_FIELD = "mac"


def _secret(directory: Path) -> bytes:
    """The cache's secret under `directory`, made on first use (0600, exclusive create: two first users agree)."""
    path = directory / SECRET_NAME
    directory.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        made = secrets.token_bytes(SECRET_BYTES)
        with os.fdopen(fd, "wb") as handle:
            handle.write(made)
            handle.flush()
            os.fsync(handle.fileno())
    data = b""
    for _ in range(100):  # the creator may be between its create and its write: wait for the whole secret
        data = path.read_bytes()
        if len(data) == SECRET_BYTES:
            return data
    raise OSError(f"{path} is not a secret of {SECRET_BYTES} bytes ({len(data)}): remove it to make a new one")


def _canonical(record: dict[str, Any]) -> bytes:
    body = {k: v for k, v in record.items() if k != MAC_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def sealed(directory: Path, record: dict[str, Any]) -> dict[str, Any]:
    """`record` with its MAC under the secret of the cache in `directory`."""
    mac = hmac.new(_secret(directory), _canonical(record), "sha256").hexdigest()
    return {**{k: v for k, v in record.items() if k != MAC_FIELD}, MAC_FIELD: mac}


def is_sealed(directory: Path, record: dict[str, Any]) -> bool:
    """Whether `record` carries the MAC the tool gave it (any edit since, or none at all: False)."""
    mac = record.get(MAC_FIELD)
    if not isinstance(mac, str):
        return False
    want = hmac.new(_secret(directory), _canonical(record), "sha256").hexdigest()
    return hmac.compare_digest(mac, want)
