"""The one parser of TOML and JSON the tool reads: its failures, deep nesting included, are bad input.

Python's `tomllib` and `json` recurse once per level of nesting: `a = [[[[...]]]]` or `[[[[...]]]]`
a few thousand levels deep raises RecursionError, which no caller expects. Every TOML and JSON the
tool reads (its own files, the scan data, a state or journal file, a page from an index) goes
through here, so a malformed or hostile document is one error of the caller's class, never a
traceback. Reading the file is release/core/files.py's job; `load_toml`/`load_json` do both.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from release.core.errors import BadInputError
from release.core.files import TEXT_LIMIT, read_text

NESTED = "nested too deeply to read"


def parse_toml(
    text: str, *, where: str, error: type[Exception] = BadInputError, hint: str | None = None
) -> dict[str, Any]:
    """`text` as TOML, or `error` naming `where` (the file or URL it came from)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where} is not valid TOML: {exc}", hint) from None
    except RecursionError:
        raise error(f"{where} is not valid TOML: {NESTED}", hint) from None


def parse_json(
    text: str | bytes, *, where: str, error: type[Exception] = BadInputError, hint: str | None = None
) -> Any:
    """`text` as JSON, or `error` naming `where` (the file or URL it came from)."""
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(f"{where} is not valid JSON: {exc}", hint) from None
    except RecursionError:
        raise error(f"{where} is not valid JSON: {NESTED}", hint) from None


def load_toml(
    path: Path, *, error: type[BadInputError] = BadInputError, hint: str | None = None, limit: int = TEXT_LIMIT
) -> dict[str, Any]:
    """The TOML file `path`, read by release/core/files.py (a regular file, bounded) and parsed here."""
    return parse_toml(read_text(path, limit, error=error, hint=hint), where=str(path), error=error, hint=hint)


def load_json(
    path: Path, *, error: type[BadInputError] = BadInputError, hint: str | None = None, limit: int = TEXT_LIMIT
) -> Any:
    """The JSON file `path`, read by release/core/files.py (a regular file, bounded) and parsed here."""
    return parse_json(read_text(path, limit, error=error, hint=hint), where=str(path), error=error, hint=hint)
