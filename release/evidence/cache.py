"""The evidence cache: one JSON per run, keyed by the digest of every input, computed once under a file lock.

`<cache>/evidence/<key>.json` (beside the wheel cache, `VLLM_FUSED_MOE_CACHE` moves both): the key
is the sha256 of the run's inputs (the wheel's sha256, or "pristine"; the vLLM release wheel's
sha256; the test's path and digest; the tool's digest; the interpreter). Two processes after the
same key wait for each other (a lock file beside it), so a run is computed once across a whole
test suite. Only a clean pass or a clean fail is kept: an error is computed again next time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

from release.core.hashing import sha256_hex
from release.core.journal import write_atomic
from release.core.parse import parse_json
from release.pristine.wheel import cache_dir

# One run's whole bound is the runner's; a lock held longer than this is a run that hangs.
LOCK_TIMEOUT_S = 1800.0


def evidence_cache() -> Path:
    return cache_dir().parent / "evidence"


def key_of(*inputs: str) -> str:
    return sha256_hex("\0".join(inputs).encode())


def cached_run(
    key: str, compute: Callable[[], dict[str, Any]], keep: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The stored result for `key`, or `compute()`'s, stored when `keep` says it may stand for a later run."""
    directory = evidence_cache()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{key}.json"
    with FileLock(str(directory / f"{key}.lock"), timeout=LOCK_TIMEOUT_S):
        stored = _read(path)
        if stored is not None and stored.get("key") == key and keep(stored):
            return stored
        result = {**compute(), "key": key}
        if keep(result):
            write_atomic(path, (json.dumps(result, indent=1, sort_keys=True) + "\n").encode())
        return result


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = parse_json(path.read_text(encoding="utf-8"), where=str(path), error=ValueError)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
