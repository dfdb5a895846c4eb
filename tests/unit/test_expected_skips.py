"""tests/expected-skips.toml names every skip a run may report; tests/conftest.py fails a run on one it does not
name (seen to: a `pytest.skip` added to a unit test failed `nox -s unit`, naming it)."""

from __future__ import annotations

from helpers.skips import EXPECTED_SKIPS, expected_skips, unnamed_skips


def test_each_expected_skip_says_why() -> None:
    entries = expected_skips()
    assert entries and all(why.strip() for why in entries.values()), EXPECTED_SKIPS


def test_a_skip_the_list_does_not_name_is_found() -> None:
    skipped = [("tests/x.py::test_named[a]", "named"), ("tests/x.py::test_other", "nobody said")]
    assert unnamed_skips(skipped, ["tests/x.py::test_named[[]*]"]) == [skipped[1]]
    assert unnamed_skips(skipped, ["tests/x.py::*"]) == []
    assert unnamed_skips(skipped, []) == skipped


def test_an_xdist_group_after_the_test_id_does_not_hide_it_from_its_pattern() -> None:
    """`nox -s test` runs with `--dist loadgroup`, whose ids end in `@GROUP`: the full run reported the lint
    group's skips as unexpected although the list names them (the unit tier, without xdist, did not)."""
    grouped = [("tests/x.py::test_named[a]@tests/x.py", "named"), ("tests/x.py::test_other@g", "nobody said")]
    assert unnamed_skips(grouped, ["tests/x.py::test_named[[]*]"]) == [grouped[1]]
