"""Publish only what the checkout builds (issue 43): a wheel that names no build of this checkout is refused before
anything is rebuilt or any test runs, and the index is left as it was.

A crafted wheel that names a real commit is rebuilt there and refused at its first differing member
(tests/e2e/test_rebuild.py); here, the wheels that name nothing a rebuild could start from, against this
checkout (a git repository), with the real CLI in a process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import REPO, run_release
from helpers.failure import failed
from helpers.synthetic import demo_wheel
from helpers.train import load_train
from release.core.errors import MissingFixError, UnprovenWheelError
from release.core.layout import Layout

FACTS = {"source_date_epoch": 315532800, "dirty": []}


@pytest.mark.parametrize(
    ("facts", "said"),
    [
        (None, "it has no build facts (_build_info.json): it is no build of this checkout"),
        ({**FACTS, "commit": "f" * 40}, f"its build facts name commit {'f' * 40}, which is not in this checkout's"),
        ({**FACTS, "commit": "--output=/tmp/x"}, "its build facts name commit --output=/tmp/x, which is not in"),
        ({**FACTS, "commit": ""}, "its build facts name no commit, and this checkout is a git repository"),
        ({"commit": "0" * 40}, "its build facts name no commit, date or dirt"),
    ],
    ids=["no build facts", "a commit of another history", "an option for a commit", "no commit", "no date"],
)
def test_a_wheel_that_names_no_build_of_this_checkout_is_refused(
    tmp_path: Path, facts: dict[str, object] | None, said: str
) -> None:
    tag = load_train(Layout(REPO)).entries[-1].tag
    wheel = demo_wheel(tmp_path / "dist", f"{tag.removeprefix('v')}+fm.1", facts)
    index = tmp_path / "index"
    published = run_release(REPO, "publish", str(wheel), str(index))
    assert published.returncode == 2, published.stdout + published.stderr
    error = failed(published)
    assert error.reference == UnprovenWheelError.reference, error
    assert error.message.startswith(f"not publishing: {wheel.name}: {said}"), error
    assert "nothing was published" in error.hint
    assert not index.exists()


def test_publish_runs_checks_gates_a_bug_that_lost_its_trailer_is_refused(project: Path, tmp_path: Path) -> None:
    """Issue 43, path 3: the head's bug patch's `Bug:` made `Downstream:` (one word of a commit message). `check`
    refused (the records still say the head has the bug), `publish` exited 0 with `"bugs": []`. It runs check's
    gates now, on a wheel that names this checkout's tree (a copy that is no git repository, commit "")."""
    layout = Layout(project)
    head = load_train(layout).entries[-1]
    [bug] = head.bugs
    patch = next(p for p in sorted(layout.patches.glob("*.patch")) if f"Bug: {bug} " in p.read_text())
    patch.write_text(patch.read_text().replace(f"Bug: {bug} ", "Downstream: ", 1))
    wheel = demo_wheel(tmp_path / "dist", f"{head.tag.removeprefix('v')}+fm.1", {**FACTS, "commit": ""})
    index = tmp_path / "index"
    published = run_release(project, "publish", str(wheel), str(index))
    assert published.returncode == 2, published.stdout + published.stderr
    error = failed(published)
    assert error.reference == MissingFixError.reference, error
    # check's per-tag gate, held for the tag of the wheel
    assert error.message.startswith(f"check: vLLM {head.tag} (line {head.line}) is affected by {bug}"), error
    assert not index.exists()
