"""The evidence cache: one JSON per run, keyed by the digest of every input, computed once under a file lock.

`<cache>/evidence/<key>.json` (beside the wheel cache, `VLLM_FUSED_MOE_CACHE` moves both): the key
is the sha256 of the run's inputs (the kind of run; the wheel's sha256, or "pristine"; the vLLM release
wheel's sha256; the test's path and digest; the tool's digest; the proving interpreter's identity). Two
processes after the same key wait for each other (a lock file beside it), so a run is computed once
across a whole test suite. Only a clean pass or a clean fail is kept: an error is computed again next time.

An entry is trusted only when it proves itself on read (docs/guarantees.md, "The cache"): the inputs
it records hash to the key it is stored under, and it carries the MAC the tool gave it under the
cache's secret (release/core/seal.py). Anything else, a hand edit of `failed` to `passed` included, is
read as absent and the run is made again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from release.core.errors import BadInputError
from release.core.hashing import sha256_hex
from release.core.journal import write_atomic
from release.core.parse import parse_json
from release.core.seal import is_sealed, sealed
from release.pristine.wheel import cache_dir

# One run's whole bound is the runner's; a lock held longer than this is a run that hangs.
LOCK_TIMEOUT_S = 1800.0


def cache_root() -> Path:
    """The cache directory that holds the wheel cache, the evidence and the cache's secret."""
    return cache_dir().parent


def evidence_cache() -> Path:
    return cache_root() / "evidence"


def key_of(*inputs: str) -> str:
    return sha256_hex("\0".join(inputs).encode())


def trusted(stored: dict[str, Any] | None, key: str) -> bool:
    """An entry stands for a run only when its recorded inputs hash to `key` and the tool's MAC covers it."""
    if stored is None or stored.get("key") != key:
        return False
    inputs = stored.get("inputs")
    if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs) or key_of(*inputs) != key:
        return False
    return is_sealed(cache_root(), stored)


def cached_run(
    inputs: Sequence[str], compute: Callable[[], dict[str, Any]], keep: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The stored result for `inputs`, or `compute()`'s, stored when `keep` says it may stand for a later run."""
    key = key_of(*inputs)
    directory = evidence_cache()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{key}.json"
    with FileLock(str(directory / f"{key}.lock"), timeout=LOCK_TIMEOUT_S):
        stored = read_entry(path)
        if stored is not None and trusted(stored, key) and keep(stored):
            return stored
        result = sealed(cache_root(), {**compute(), "key": key, "inputs": list(inputs)})
        if keep(result):
            write_atomic(path, (json.dumps(result, indent=1, sort_keys=True) + "\n").encode())
        return result


def read_entry(path: Path) -> dict[str, Any] | None:
    try:
        data = parse_json(path.read_bytes(), where=str(path))
    except (OSError, BadInputError):
        return None
    return data if isinstance(data, dict) else None
