"""PR.md against vLLM's pull request template and contribution rules, and the regression test's plumbing.

The template's headings, checklist, footer and title prefixes are data
(release/upstream_pr/vllm-pr-template.toml, copied from vLLM with the commit named there):
these tests read them from there, never from the renderer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import CHECKOUT, tag_facts
from helpers.fix import fix_patch
from release.core.errors import MissingUpstreamTestError
from release.core.layout import Layout
from release.model.patch import Patch
from release.model.series import Series
from release.queue.regression import upstream_test
from release.queue.snapshot import Checkout
from release.upstream_pr.mail import upstream_mail, with_test
from release.upstream_pr.plan import proof_plan
from release.upstream_pr.prove import EXPECT_FAIL, EXPECT_PASS, Outcome, Run
from release.upstream_pr.pull_request import PullRequest, RegressionTest, render, template_data

DATA = template_data()
PATCH = fix_patch()
TEST = "tests/kernels/moe/test_a_regression.py"  # any path PR.md may name: what the renderer quotes


def pull_request(regression: RegressionTest | None) -> PullRequest:
    patch = Patch.load(PATCH)
    return PullRequest(patch, upstream_mail(patch), "v0.0.0", "[Bugfix]", [], regression)


def proven() -> RegressionTest:
    base, fixed = "v1.0.0", "v2.0.0"
    runs = [
        Outcome(Run(base, False, EXPECT_FAIL, "the PR's base"), "failed", "2 failed", "assert False is True", 1.0),
        Outcome(Run(base, True, EXPECT_PASS, "the PR's base"), "passed", "2 passed", "", 1.0),
        Outcome(Run(fixed, False, EXPECT_PASS, "upstream"), "passed", "2 passed", "", 1.0),
    ]
    return RegressionTest(TEST, runs)


def test_the_template_data_says_where_it_came_from() -> None:
    source = DATA["source"]
    assert source["repository"] == "https://github.com/vllm-project/vllm"
    assert source["path"] == ".github/PULL_REQUEST_TEMPLATE.md"
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])


@pytest.mark.parametrize("regression", [None, RegressionTest(TEST), proven()], ids=["no-test", "not-run", "proven"])
def test_pr_md_has_the_templates_sections_checklist_and_footer(regression: RegressionTest | None) -> None:
    text = render(pull_request(regression))
    template = DATA["template"]
    assert [line[3:] for line in text.splitlines() if line.startswith("## ")] == template["sections"]
    checklist = text.split(f"<summary> {template['checklist']} </summary>", 1)[1].split("</details>", 1)[0]
    assert len(re.findall(r"^- \[[ x]\] ", checklist, re.M)) == template["checklist_items"]
    assert text.rstrip("\n").splitlines()[-1].startswith(template["footer"])


def test_the_title_has_a_vllm_category_prefix() -> None:
    title = pull_request(None).title
    prefixes = DATA["rules"]["title_prefixes"]
    assert any(title.startswith(prefix + " ") for prefix in prefixes), title


def test_a_downstream_patch_is_not_titled_a_bugfix() -> None:
    """Issue 38, 8: `upstream_pr 0002` titled a Downstream: patch "[Bugfix]"; its category follows its purpose."""
    text = PATCH.read_text()
    bug = Patch.load(PATCH)
    assert not bug.purpose.downstream
    trailer = next(line for line in text.splitlines() if line.startswith("Bug: "))
    downstream = Patch(PATCH.name, text.replace(trailer, "Downstream: a check we keep downstream", 1))
    downstream.validate_message()
    assert downstream.purpose.downstream
    prefixes = DATA["rules"]["title_prefixes"]
    titles = {
        name: PullRequest(p, upstream_mail(p), "v0.0.0", None, [], None).title
        for name, p in (("bug", bug), ("downstream", downstream))
    }
    assert titles["bug"].startswith("[Bugfix] ") and not titles["downstream"].startswith("[Bugfix]"), titles
    assert any(titles["downstream"].startswith(prefix + " ") for prefix in prefixes), titles
    given = PullRequest(downstream, upstream_mail(downstream), "v0.0.0", "[Kernel]", [], None).title
    assert given.startswith("[Kernel] ")


def test_a_pr_without_a_test_or_with_an_unrun_one_says_so_first() -> None:
    for regression, loud in (
        (None, "**This PR carries no regression test.**"),
        (RegressionTest(TEST), f"**The regression test `{TEST}` was not run**"),
    ):
        text = render(pull_request(regression))
        head = text.split("## ", 1)[0]
        assert "> [!WARNING]" in head and loud in head
        assert "- [ ] The test results" in text


def test_a_proven_test_is_quoted_run_by_run() -> None:
    text = render(pull_request(proven()))
    assert "[!WARNING]" not in text
    result = text.split("## Test Result", 1)[1]
    assert f"### Regression test `{TEST}`" in result
    assert "| `v1.0.0` (the PR's base) | without | fail | failed, as expected | 2 failed: `assert False is True` |" in (
        result
    )
    assert "| `v1.0.0` (the PR's base) | with | pass | passed, as expected | 2 passed |" in result
    assert "| `v2.0.0` (upstream) | without | pass | passed, as expected | 2 passed |" in result


def test_the_test_is_added_as_git_writes_a_new_file() -> None:
    mail = with_test(upstream_mail(Patch.load(PATCH)), "tests/x/test_a.py", "hello\n")
    section = mail.diff.split("diff --git a/vllm/", 1)[0]
    # `git hash-object` of "hello\n"
    assert section == (
        "diff --git a/tests/x/test_a.py b/tests/x/test_a.py\nnew file mode 100644\n"
        "index 0000000000000000000000000000000000000000..ce013625030ba8dba906f756967f9e9ca394464a\n"
        "--- /dev/null\n+++ b/tests/x/test_a.py\n@@ -0,0 +1 @@\n+hello\n"
    )
    assert next(h.added for h in mail.hunks) == ["hello"]


@pytest.mark.rules
def test_every_upstream_test_of_the_queue_is_ours_and_a_cpu_test() -> None:
    """Each patch of the checkout's queue that names a regression test (its trailer, or tests.toml) names a file
    of patches/upstream-tests/ that carries our licence header and vLLM's CPU-test mark."""
    layout = Layout(CHECKOUT)
    for name in Series.load(layout.series).names:
        found = upstream_test(layout, Patch.load(layout.patches / name))
        if found is None:
            continue
        path, text = found
        assert path.startswith("tests/") and path.endswith(".py"), (name, path)
        assert text.startswith("# SPDX-License-Identifier: Apache-2.0\n"), (name, path)
        assert "pytestmark = pytest.mark.cpu_test" in text, (name, path)  # a CPU test, marked as vLLM marks them


def test_a_patchs_own_trailer_names_its_test_before_the_index(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    tests = tmp_path / "patches" / "upstream-tests"
    (tests / "tests" / "a").mkdir(parents=True)
    (tests / "tests" / "a" / "test_b.py").write_text("def test_b():\n    pass\n")
    (tests / "tests.toml").write_text(f'[tests]\n"{PATCH.name}" = "{TEST}"\n')
    patch = Patch.load(PATCH)
    assert not patch.upstream_test
    with pytest.raises(MissingUpstreamTestError):  # named by the index, but not in this layout
        upstream_test(layout, patch)
    assert upstream_test(layout, patch.with_trailer("Upstream-Test", "tests/a/test_b.py")) == (
        "tests/a/test_b.py",
        "def test_b():\n    pass\n",
    )


@pytest.mark.parametrize(
    "value", ["tests/kernels/moe/test_missing.py", "../tests/test_x.py", "vllm/test_x.py", "tests/x.txt"]
)
def test_an_upstream_test_that_is_not_there_or_not_a_test_path_is_bad_input(tmp_path: Path, value: str) -> None:
    layout = Layout(tmp_path)
    (tmp_path / "patches" / "upstream-tests" / "tests").mkdir(parents=True)
    patch = Patch.load(PATCH).with_trailer("Upstream-Test", value)
    with pytest.raises(MissingUpstreamTestError) as raised:
        upstream_test(layout, patch)
    assert raised.value.exit_code == 2


def test_the_proof_plan_comes_from_the_pin_the_train_and_the_scan() -> None:
    patch = Patch.load(PATCH)
    head = tag_facts.head().tag
    plan = proof_plan(Checkout.load(Layout.default()), patch)
    carrying = [e.tag for e in tag_facts.train().entries if patch.name in e.patches]
    expected = [(head, False, EXPECT_FAIL), (head, True, EXPECT_PASS)]
    if carrying[-1] != head:
        expected += [(carrying[-1], False, EXPECT_FAIL), (carrying[-1], True, EXPECT_PASS)]
    expected.append((tag_facts.first_fixed(), False, EXPECT_PASS))
    assert [(run.tag, run.patched, run.expect) for run in plan] == expected
