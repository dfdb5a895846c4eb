"""What the scan tests share: the document's schema check (a process, and in-process) and the train's versions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

from helpers import REPO
from helpers.fix import fix_patch
from helpers.train import load_train
from release.core.layout import Layout
from release.core.versions import version_of_tag

SCHEMA = REPO / "docs" / "affected-releases.schema.json"
# The queue's first bug fix (helpers/fix.py): the patch the scan data is about, whatever its name.
FIX = fix_patch().name


def validate(document: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema (the test group's pin) against docs/affected-releases.schema.json."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA), str(document)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def schema_errors(document: Path) -> list[str]:
    """The same schema checked in this process (jsonschema, which check-jsonschema runs): its errors, or []."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    found = validator(schema, format_checker=jsonschema.FormatChecker()).iter_errors(json.loads(document.read_text()))
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in found]


def train_versions(root: Path) -> set[str]:
    return {version_of_tag(tag) for tag in load_train(Layout(root)).tags}
