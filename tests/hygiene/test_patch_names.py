"""No test names a patch file of the checkout's own queue (issue 46).

A test of a behaviour that needs "some bug fix of the queue" takes it from the data (helpers/fix.py), and a
test that holds the checkout to the rules goes over every patch: so renaming, renumbering, retiring or
replacing today's patches breaks no test. A name in a test's own temporary queue (`0001-a.patch`) is no
patch of the checkout, and fine. The file names are read from patches/ as it stands (the common queue,
patches/retired/ and each line's variants), never listed here.
"""

from __future__ import annotations

from pathlib import Path

from helpers import REPO

# Where the checkout keeps patch files: the common queue, what upstream took, each release line's variants.
PATCH_GLOBS = ("*.patch", "retired/*.patch", "lines/*/*.patch")


def checkout_patch_names(patches: Path) -> set[str]:
    return {path.name for pattern in PATCH_GLOBS for path in patches.glob(pattern) if path.is_file()}


def naming(tests: Path, names: set[str]) -> list[str]:
    """`FILE names NAME` for each Python file under `tests` that holds one of `names` literally."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(tests.parent)} names {name}" for name in sorted(names) if name in text]
    return found


def test_no_test_names_a_patch_file_of_the_checkout() -> None:
    found = naming(REPO / "tests", checkout_patch_names(REPO / "patches"))
    assert found == [], (
        "a test names a patch file of the checkout: take it from the data (tests/helpers/fix.py: fix_patch, "
        "fix_variant) or go over every patch, so that a rename breaks no test:\n" + "\n".join(found)
    )


def test_a_named_patch_of_the_queue_is_found_and_a_test_s_own_is_not(tmp_path: Path) -> None:
    """The check itself, on a made-up checkout: each place a patch file lives, and a name only a test uses."""
    patches, tests = tmp_path / "patches", tmp_path / "tests"
    for where in ("0003-common.patch", "retired/0001-gone.patch", "lines/old/0003-common-old.patch"):
        (patches / where).parent.mkdir(parents=True, exist_ok=True)
        (patches / where).write_text("", encoding="utf-8")
    (patches / "series").write_text("0003-common.patch\n", encoding="utf-8")
    names = checkout_patch_names(patches)
    assert names == {"0003-common.patch", "0001-gone.patch", "0003-common-old.patch"}
    (tests / "unit").mkdir(parents=True)
    (tests / "unit" / "test_own.py").write_text('NAME = "0001-a.patch"  # a temporary queue\'s\n', encoding="utf-8")
    assert naming(tests, names) == []
    (tests / "unit" / "test_bound.py").write_text('PATCH = "patches/retired/0001-gone.patch"\n', encoding="utf-8")
    (tests / "helpers.py").write_text('VARIANT = "0003-common-old.patch"\n', encoding="utf-8")
    assert naming(tests, names) == [
        "tests/helpers.py names 0003-common-old.patch",
        "tests/unit/test_bound.py names 0001-gone.patch",
    ]
