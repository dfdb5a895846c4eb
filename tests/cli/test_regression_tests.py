"""`check` refuses a bug patch that names no regression test: publish could prove nothing with it."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import run_release
from helpers.failure import failed
from release.core.layout import Layout
from release.queue.regression import bug_patches, untested


def test_check_refuses_a_bug_patch_that_names_no_regression_test(project: Path) -> None:
    layout = Layout(project)
    [patch] = bug_patches(layout)
    assert run_release(project, "check").returncode == 0
    index = layout.patches / "upstream-tests" / "tests.toml"
    index.write_text(re.sub(rf'^"{re.escape(patch.name)}" = .*\n', "", index.read_text(), flags=re.M))
    assert untested(layout, [patch]) == [patch.name]
    checked = run_release(project, "check")
    assert checked.returncode == 2, checked.stdout + checked.stderr
    error = failed(checked)
    assert error.message == f"check: {patch.name} fixes a bug but names no regression test", checked.stderr
    assert error.hint.startswith("write the test at patches/upstream-tests/")
