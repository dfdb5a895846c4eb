"""Every kind of failure has a stable reference: unique, kebab-case, and listed in docs/architecture.md
with its exit code, so that the `error[REFERENCE]:` line an operator sees can be looked up."""

from __future__ import annotations

import re

import pytest

from helpers import REPO, tag_facts
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


def test_the_kinds_raised_in_many_places_build_their_message_from_their_arguments() -> None:
    tag, line = tag_facts.head().tag, "some_line"
    missing = errors.MissingFixError(
        what="check", tag=tag, bugs=[("39", "double reduce", "patches/train.toml")], carrying=[], line=line
    )
    assert str(missing) == (
        f"check: vLLM {tag} (line {line}) is affected by 39 (double reduce) (patches/train.toml), but its replay "
        "would not fix it (it carries no patch)"
    )
    assert (missing.tag, missing.line, missing.bugs) == (tag, line, (("39", "double reduce", "patches/train.toml"),))
    assert missing.hint == errors.MissingFixError.default_hint
    stale = errors.StaleVariantError(
        what="check", stale=["a is stale", "b is stale"], commons=["0002-b", "0001-a", "0001-a"]
    )
    assert str(stale) == "check: a is stale; b is stale"
    assert stale.hint.startswith("run `python -m release pq carry 0001-a` and `python -m release pq carry 0002-b`, ")
    skip = errors.UnprovenSkipError(what="check", skips=["bug 39 ..."], tag=tag, line=line, patch="0001-a")
    assert f"--tag {tag} --on {line}" in skip.hint and "pq carry 0001-a`" in skip.hint
    assert (
        errors.UnprovenSkipError(what="2 skip(s) not proven", skips=["x", "y"]).hint
        == errors.UnprovenSkipError.default_hint
    )
    wheel = errors.UnprovenWheelError(what="not publishing w.whl", problems=["one", "two"])
    assert (str(wheel), wheel.problems) == ("not publishing w.whl: one; two", ("one", "two"))
    assert str(errors.UnknownTagError(tag=tag, source="git:/x")) == f"git:/x has no tag {tag}"
    assert (
        str(errors.UnknownTagError(tag="0.1", index="https://i/simple"))
        == "no vLLM release 0.1 on the package index (https://i/simple)"
    )
    assert str(errors.UnknownTagError(tag="'x'")).startswith("'x' is not a vLLM release tag")


@pytest.mark.parametrize(
    "kind",
    [
        errors.MissingFixError,
        errors.StaleVariantError,
        errors.UnprovenSkipError,
        errors.UnprovenWheelError,
        errors.UnknownTagError,
    ],
)
def test_a_raise_site_cannot_hand_make_their_message(kind: type[errors.ReleaseError]) -> None:
    with pytest.raises(TypeError):
        kind("a message written at the raise site")


def test_a_subclass_made_outside_the_hierarchy_is_no_kind_of_it() -> None:
    """A test double of a kind (or a plugin's) must not change the table the docs hold, nor its uniqueness."""

    class MissingFixError(errors.BadInputError):  # a double with a kind's very name
        """A double."""

    assert MissingFixError.reference == errors.MissingFixError.reference
    assert MissingFixError not in errors.kinds() and errors.MissingFixError in errors.kinds()
    assert errors.reference_table().count("`missing-fix`") == 1
