"""The scan's document (affected-releases.json beside the doctor, `scan --json`): its schema and the one reader.

`python -m release scan` writes it; `status`, `build`, `publish` and `upstream-pr` read the checkout's copy
(release/queue/bugs.py), `scan` reads its previous one (release/scan/document.py) and `train watch` the one
it is given (release/train/watch.py): all three through `read_scan`. The runtime's doctor
(release/overlay/runtime/vllm_fused_moe/_doctor/installed.py) keeps a reader of its own: it ships in the
wheel, where release/ is not, and reads the same rule (schema 1, `releases` an object).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeGuard

from release.core.errors import BadInputError, MalformedDataError
from release.core.parse import load_json

SCAN_SCHEMA = 1  # docs/affected-releases.schema.json
HINT = "it is written by `python -m release scan`; restore it from git"


def is_scan_document(data: object) -> TypeGuard[dict[str, Any]]:
    """A scan document of SCAN_SCHEMA: an object whose `schema` is it and whose `releases` is an object."""
    return isinstance(data, dict) and data.get("schema") == SCAN_SCHEMA and isinstance(data.get("releases"), dict)


def read_scan(
    path: Path, *, error: type[BadInputError] = MalformedDataError, hint: str = HINT, missing_ok: bool = True
) -> dict[str, Any] | None:
    """The scan document at `path`; None where there is no file and `missing_ok`.

    Read by release/core/files.py (a regular file, bounded) and parsed by release/core/parse.py; a file
    that cannot be read, is not JSON or is not a scan document raises `error`, one line."""
    if missing_ok and not os.path.lexists(path):
        return None
    data = load_json(path, error=error, hint=hint)
    if not is_scan_document(data):
        raise error(f"{path} is not a scan document of schema {SCAN_SCHEMA}", hint)
    return data
