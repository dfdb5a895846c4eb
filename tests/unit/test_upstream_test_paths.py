"""`upstream-pr` reads the regression test a patch names only inside patches/upstream-tests/: a linked
directory on the way (`tests -> /some/secret`), or the folder itself linked out of the checkout, would
put a file from elsewhere into the mail (and, with --vllm, into the contributor's branch). Each path is
resolved and refused outside its folder; read in this process, no mail is made.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.fix import fix_patch
from release.core.errors import MissingUpstreamTestError
from release.core.layout import Layout
from release.model.patch import Patch
from release.queue.regression import upstream_test, upstream_tests_dir

SECRET = "TOKEN = 'a secret outside the checkout'\n"


def _patch(project: Path, test: str) -> Patch:
    path = fix_patch(project)
    return Patch(path.name, path.read_text()).with_trailer("Upstream-Test", test)


@pytest.mark.parametrize("kind", ["linked-tests-dir", "linked-upstream-tests", "linked-subdir"])
def test_an_upstream_test_reached_through_a_link_is_refused(project: Path, tmp_path: Path, kind: str) -> None:
    layout = Layout(project)
    where = upstream_tests_dir(layout)
    secret = tmp_path / "secret"
    (secret / "tests" / "kernels").mkdir(parents=True)
    for folder in (secret, secret / "tests", secret / "tests" / "kernels"):
        (folder / "creds.py").write_text(SECRET)
    if kind == "linked-tests-dir":  # patches/upstream-tests/tests -> /some/secret
        shutil.rmtree(where / "tests")
        (where / "tests").symlink_to(secret, target_is_directory=True)
        test = "tests/creds.py"
    elif kind == "linked-upstream-tests":  # the whole folder, linked out of the checkout
        shutil.rmtree(where)
        where.symlink_to(secret, target_is_directory=True)
        test = "tests/creds.py"
    else:  # a directory deeper down
        (where / "tests" / "leak").symlink_to(secret / "tests" / "kernels", target_is_directory=True)
        test = "tests/leak/creds.py"
    with pytest.raises(MissingUpstreamTestError) as refused:
        upstream_test(layout, _patch(project, test))
    assert "outside" in str(refused.value), refused.value


def test_the_named_test_in_its_folder_is_read(project: Path) -> None:
    layout = Layout(project)
    found = upstream_test(layout, Patch(fix_patch(project).name, ""))
    assert found is not None
    path, text = found
    assert text == (upstream_tests_dir(layout) / path).read_text()


@pytest.mark.timeout(60)
def test_a_fifo_tests_toml_is_refused_at_once(project: Path) -> None:
    """patches/upstream-tests/tests.toml committed as a FIFO: refused by the one reader, never a hang."""
    layout = Layout(project)
    index = upstream_tests_dir(layout) / "tests.toml"
    index.unlink()
    os.mkfifo(index)
    with pytest.raises(MissingUpstreamTestError, match="is a FIFO, not a regular file"):
        upstream_test(layout, Patch(fix_patch(project).name, ""))
