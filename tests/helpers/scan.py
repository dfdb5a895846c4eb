"""What the scan tests share: the document's schema check and the train's versions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import REPO
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.model.train import Train

SCHEMA = REPO / "docs" / "affected-releases.schema.json"
PATCH_0001 = "0001-flashinfer-nvlink-output-is-reduced.patch"


def validate(document: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema (the test group's pin) against docs/affected-releases.schema.json."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA), str(document)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def train_versions(root: Path) -> set[str]:
    return {version_of_tag(tag) for tag in Train.load(Layout(root).train).tags}
