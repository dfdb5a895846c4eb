"""The scan document's schema, docs/affected-releases.schema.json, spells a patch's and a release's
status in the words of the enums every stage says them in (tests/unit/test_vocabulary.py: one word
per fact)."""

from __future__ import annotations

import json

from helpers import REPO
from release.model.outcome import PatchStatus, ReleaseStatus


def test_the_scan_schema_holds_the_words_of_the_status_enums() -> None:
    """The shipped document (which the doctor reads in users' environments) keeps its words: the enums are them."""
    schema = json.loads((REPO / "docs" / "affected-releases.schema.json").read_text(encoding="utf-8"))
    release = schema["$defs"]["release"]["properties"]
    assert set(release["status"]["enum"]) == set(ReleaseStatus)
    on_a_release = set(PatchStatus) - {PatchStatus.NOT_REACHED}  # not-reached is rebase's: it stops at a conflict
    assert set(release["patches"]["additionalProperties"]["enum"]) == on_a_release
