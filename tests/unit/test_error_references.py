"""Every kind of failure has a stable reference: unique, kebab-case, and listed in docs/architecture.md
with its exit code, so that the `error[REFERENCE]:` line an operator sees can be looked up."""

from __future__ import annotations

import re

from helpers import REPO
from release.core import errors

ARCHITECTURE = REPO / "docs" / "architecture.md"
SHAPE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


def test_every_kind_has_one_reference_of_its_own_in_kebab_case() -> None:
    kinds = errors.kinds()
    assert errors.MissingFixError in kinds and kinds[0] is errors.ReleaseError
    references = [kind.reference for kind in kinds]
    assert [r for r in references if not SHAPE.fullmatch(r)] == []
    assert len(set(references)) == len(references), sorted(r for r in references if references.count(r) > 1)
    # Derived from the class name unless a kind says otherwise, so a new kind has one without a line of code.
    assert errors.MissingFixError.reference == "missing-fix" and errors.NoGpuError.reference == "no-gpu"
    assert errors.UnverifiedFlashInferError.reference == "unverified-flashinfer"


def test_every_kind_says_when_it_is_raised() -> None:
    assert [kind.__name__ for kind in errors.kinds() if not (kind.__doc__ or "").strip()] == []


def test_the_reference_table_in_the_docs_is_the_hierarchy() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    found = re.search(r"<!-- error-references:begin[^>]*-->\n(.*?)<!-- error-references:end -->", text, re.S)
    assert found, "docs/architecture.md lost its error-references markers"
    assert found.group(1) == errors.reference_table(), (
        "regenerate the table: python -c 'from release.core.errors import reference_table; print(reference_table())'"
    )
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ")[1] for line in found.group(1).splitlines()[2:]}
    assert rows["missing-fix"] == "2" and rows["transport"] == "4" and rows["drift"] == "1"
