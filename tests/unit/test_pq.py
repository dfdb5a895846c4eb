"""The patch-queue loop's pure parts: a patch's name through a commit, the series rewrite, the message template.

The loop itself, as processes on a copy of the checkout, is tests/e2e/test_pq.py.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from helpers import REPO
from helpers.fix import fix_patch
from release.core.errors import MalformedPatchError
from release.model.patch import Patch
from release.model.series import Series
from release.pq.names import mark, new_name, next_number, slug_of, unmark
from release.pq.template import template

FIX = fix_patch()
DIFF = FIX.read_text().split("\ndiff --git ", 1)[1]
# The diff's first added line (not its `+++` header): where a test hides a name inside the diff.
ADDED = next(line for line in DIFF.splitlines() if line.startswith("+") and not line.startswith("+++"))


def mail(message: str, subject: str = "fused_moe: a change") -> str:
    """A format-patch mail with this message (the checkout's bug fix's diff under it)."""
    return (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: A <a@example.com>\n"
        f"Date: Thu, 3 Dec 2026 00:00:00 +0000\nSubject: {subject}\n\n{message}\n\ndiff --git {DIFF}"
    )


ANSWERED = (
    "Why: the combine's output is copied without a look at its shape.\n\n"
    "How: assert the shape before the copy.\n\n"
    "Related PR: none yet.\n\n"
    "Future plan: send it upstream.\n\n"
    "Origin: vendor\nDownstream: a check we keep downstream\nDepends-On: none\nRisk: an assert on the hot path"
)


@pytest.mark.parametrize(
    "message",
    [
        ANSWERED,
        "Why: prose only, no trailer block at the end.",
        ANSWERED + "\nPatch-Name: 0007-other.patch",  # already named: a second line is added, then both go
    ],
)
def test_mark_then_unmark_gives_back_every_byte(message: str) -> None:
    text = mail(message)
    marked = mark(text, "0002-shape-check.patch")
    assert "\nPatch-Name: 0002-shape-check.patch\n" in marked
    names, back = unmark(marked)
    assert names[-1] == "0002-shape-check.patch"
    if "0007" not in message:
        assert back == text and names == ["0002-shape-check.patch"]
    assert "Patch-Name" not in back
    assert back.endswith(text[text.index("diff --git ") :])  # the diff is never touched


def test_the_real_patch_round_trips_through_its_name_line() -> None:
    text = FIX.read_text()
    assert unmark(mark(text, FIX.name)) == ([FIX.name], text)
    assert unmark(text) == ([], text)


def test_a_name_line_of_its_own_paragraph_goes_with_its_blank_line() -> None:
    text = mail("Why: prose.")
    own = text.replace("Why: prose.\n\n", "Why: prose.\n\nPatch-Name: 0003-x.patch\n\n")
    assert unmark(own) == (["0003-x.patch"], text)


def test_a_patch_name_inside_the_diff_is_not_a_name() -> None:
    text = mail(ANSWERED).replace(ADDED, f"{ADDED}  # Patch-Name: 0009-no.patch", 1)
    assert unmark(text) == ([], text)


@pytest.mark.parametrize(
    "subject, slug",
    [
        ("fused_moe: check the combine's shape in the two-sided finalize",
         "fused-moe-check-the-combine-s-shape-in-the-two-sided"),
        ("[Bugfix] FlashInfer: NVLink output is reduced", "bugfix-flashinfer-nvlink-output-is-reduced"),
        ("::", "patch"),
    ],
)  # fmt: skip
def test_a_slug_is_the_subject_s_words(subject: str, slug: str) -> None:
    assert slug_of(subject) == slug
    assert len(slug) <= 52


def test_a_new_number_is_above_every_number_used_even_retired_or_a_line_s() -> None:
    used = ["0001-a.patch", "0004-retired.patch", "0002-variant.patch", "notes.txt"]
    assert next_number(used) == 5
    assert new_name("shape-check", used) == "0005-shape-check.patch"
    assert new_name("first", []) == "0001-first.patch"


def test_the_series_is_rewritten_in_the_new_order_with_its_comments() -> None:
    old = Series(("# header", "# two lines", "0001-a.patch", "# about b", "0002-b.patch  # inline", "", "# tail"))
    assert rewrite(old, ["0001-a.patch", "0002-b.patch"]) == old.dumps()
    assert rewrite(old, ["0002-b.patch", "0003-c.patch", "0001-a.patch"]) == (
        "# header\n# two lines\n# about b\n0002-b.patch  # inline\n0003-c.patch\n0001-a.patch\n\n# tail\n"
    )
    assert rewrite(old, ["0001-a.patch"]) == "# header\n# two lines\n0001-a.patch\n\n# tail\n"
    assert rewrite(Series(("# only a header",)), ["0001-a.patch"]) == "# only a header\n0001-a.patch\n"


def test_a_retired_line_stays_where_it_was_when_the_series_is_rewritten() -> None:
    old = Series(("# header", "retired 0001-a.patch", "0002-b.patch", "retired 0003-c.patch"))
    assert rewrite(old, ["0002-b.patch"]) == old.dumps()
    assert rewrite(old, ["0002-b.patch", "0004-d.patch"]) == (
        "# header\nretired 0001-a.patch\n0002-b.patch\n0004-d.patch\nretired 0003-c.patch\n"
    )


def rewrite(old: Series, names: list[str]) -> str:
    from release.pq.export import rewrite_series

    return rewrite_series(old, names).dumps()


def test_the_real_series_is_rewritten_byte_for_byte() -> None:
    series = Series.load(REPO / "patches" / "series")
    assert rewrite(series, series.names) == (REPO / "patches" / "series").read_text()


# ------------------------------------------------------------ the message


def patches_of(root: Path) -> list[Path]:
    """The common patches and every line's variants of a checkout."""
    return [*root.joinpath("patches").glob("*.patch"), *root.joinpath("patches", "lines").glob("*/*.patch")]


def answer_the_template(paths: list[Path]) -> None:
    """Each patch passes the tool's own check of a message (what `pq export`, `check` and `train check`
    hold it to), and the common ones the whole check of a queue's patch: nothing more is asserted
    here, so a patch the tool takes (a `Downstream:` one, a backport) the tests take too."""
    for path in paths:
        patch = Patch(path.name, path.read_text())
        patch.validate_message()
        if path.parent.name == "patches":
            patch.validate()


def test_every_patch_of_the_checkout_answers_the_template() -> None:
    """The common patches and every line's variants: message text only was brought up to it."""
    paths = patches_of(REPO)
    assert len(paths) >= 4
    answer_the_template(paths)


def test_a_downstream_patch_added_as_docs_say_answers_the_template_like_the_others(tmp_path: Path) -> None:
    """docs/patch-queue.md "Add a patch": the template takes exactly one of Bug: and Downstream:. A
    `Downstream:` patch beside the checkout's own passes the check the checkout's patches pass."""
    (tmp_path / "patches").mkdir()
    for path in patches_of(REPO):
        if path.parent.name == "patches":
            (tmp_path / "patches" / path.name).write_text(path.read_text())
    added = tmp_path / "patches" / "0099-shape-check.patch"
    added.write_text(mail(ANSWERED, "fused_moe: assert the combine's output shape"))
    Patch(added.name, added.read_text()).validate()  # the tool takes it (pq export, check)
    answer_the_template(patches_of(tmp_path))
    with pytest.raises(MalformedPatchError):  # and the check is not empty: a patch without a purpose fails it
        added.write_text(mail(ANSWERED.replace("Downstream: a check we keep downstream\n", "")))
        answer_the_template(patches_of(tmp_path))


@pytest.mark.parametrize(
    "cut, problem",
    [
        ("How: assert the shape before the copy.\n\n", "no How:"),
        ("Related PR: none yet.\n\n", "no Related PR:"),
        ("\nRisk: an assert on the hot path", "no Risk: trailer"),
        ("Origin: vendor\n", "no Origin: trailer"),
        ("\nDepends-On: none", "no Depends-On: trailer"),
        ("Downstream: a check we keep downstream\n", "neither Bug: (an id or URL and a title) nor Downstream:"),
    ],
)
def test_a_message_without_an_answer_is_refused_naming_it_and_the_template(cut: str, problem: str) -> None:
    assert cut in ANSWERED
    patch = Patch("0002-shape-check.patch", mail(ANSWERED.replace(cut, "", 1)))
    with pytest.raises(MalformedPatchError) as raised:
        patch.validate()
    message = str(raised.value)
    assert message.startswith("0002-shape-check.patch: message not in the template's shape: ")
    assert problem in message and "\n" not in message
    assert "python -m release pq new SLUG" in raised.value.hint


@pytest.mark.parametrize(
    "old, new, problem",
    [
        ("Downstream: a check we keep downstream", "Bug: https://example.com/1", "Bug: has no title"),
        ("Downstream: a check we keep downstream", "Bug: 4711 <title of the bug>", "placeholder title"),
        ("Downstream: a check we keep downstream", "Downstream: x\nBug: 1 a title", "both Bug: and Downstream:"),
        ("Risk: an assert on the hot path", "Risk: <what could break>", "Risk: is the template's placeholder"),
        ("Why: the combine's output", "Why: <what goes wrong>\n\nthe combine's output", "Why: is the template's"),
    ],
)
def test_bug_or_downstream_and_no_placeholder_left(old: str, new: str, problem: str) -> None:
    assert old in ANSWERED
    patch = Patch("0002-shape-check.patch", mail(ANSWERED.replace(old, new, 1)))
    with pytest.raises(MalformedPatchError, match=re.escape(problem)):
        patch.validate_message()


def test_the_template_unfilled_is_refused_and_answered_passes() -> None:
    text = template("0002-shape-check.patch", date(2026, 12, 4))
    message = "\n".join(line for line in text.splitlines() if not line.startswith("#"))  # what git commit keeps
    subject, body = message.split("\n\n", 1)
    body = body.replace("\nPatch-Name: 0002-shape-check.patch", "")
    with pytest.raises(MalformedPatchError) as raised:
        Patch("0002-shape-check.patch", mail(body.strip(), subject)).validate()
    for said in ("subject is the template's placeholder", "Why: is the template's placeholder", "Origin: is"):
        assert said in str(raised.value)
    answered = re.sub(r"^(\w[\w -]*): <.*>$", r"\1: answered", body.strip(), flags=re.M)
    answered = "\n".join(line for line in answered.splitlines() if not line.startswith("Bug:"))
    patch = Patch("0002-shape-check.patch", mail(answered, "fused_moe: a subject"))
    patch.validate()
    assert patch.purpose.downstream and patch.purpose.title == "answered"
    assert patch.trailers["Last-Update"] == "2026-12-04"


# An upstream commit as `git am` brings it: upstream's own message, then the DEP-3 trailers of a backport.
UPSTREAM_MESSAGE = (
    "The combine already reduces over top-k, so the finalize must not reduce again.\n\n"
    "Signed-off-by: An Upstream Author <author@example.com>\n"
    "Origin: upstream, https://github.com/vllm-project/vllm/commit/0123456789abcdef\n"
    "Applied-Upstream: v0.99.0, https://github.com/vllm-project/vllm/commit/0123456789abcdef\n"
    "Bug: https://github.com/vllm-project/vllm/issues/1 a double reduce"
)


def test_an_upstream_backport_keeps_its_own_message_with_dep3_trailers() -> None:
    patch = Patch("0002-backport.patch", mail(UPSTREAM_MESSAGE, "[Bugfix] FlashInfer combine is reduced"))
    patch.validate_message()
    assert patch.is_backport and patch.purpose.title == "a double reduce"


@pytest.mark.parametrize(
    "cut, problem",
    [
        ("Applied-Upstream: v0.99.0, https://github.com/vllm-project/vllm/commit/0123456789abcdef\n", "no Why:"),
        ("Bug: https://github.com/vllm-project/vllm/issues/1 a double reduce", "neither Bug:"),
    ],
)
def test_a_backport_without_where_it_landed_or_what_it_fixes_is_refused(cut: str, problem: str) -> None:
    patch = Patch("0002-backport.patch", mail(UPSTREAM_MESSAGE.replace(cut, ""), "[Bugfix] a subject"))
    with pytest.raises(MalformedPatchError, match=re.escape(problem)):
        patch.validate_message()


def test_a_bug_is_its_id_then_its_title() -> None:
    patch = Patch("x.patch", mail(ANSWERED.replace("Downstream: a check we keep downstream", "Bug: vllm#41 a title")))
    assert patch.purpose.bug == "vllm#41" and patch.purpose.title == "a title" and not patch.purpose.downstream


def test_the_check_refuses_a_patch_without_the_answers(tmp_path: Path) -> None:
    """Every reader of the queue validates: Queue.load through Patch.load."""
    path = tmp_path / FIX.name
    path.write_text(re.sub(r"(?m)^How:", "And:", FIX.read_text(), count=1))
    with pytest.raises(MalformedPatchError, match="no How:"):
        Patch.load(path)


@pytest.mark.parametrize("action", ["import", "new", "export"])
def test_each_action_s_help_ends_with_the_command_s_exit_codes(action: str, capsys: pytest.CaptureFixture[str]) -> None:
    from release.cli import COMMANDS, build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["pq", action, "--help"])
    listed = capsys.readouterr().out.split("exit codes:\n", 1)[1]
    codes = [int(line.split()[0]) for line in listed.splitlines() if re.match(r"  \d+ ", line)]
    assert codes == sorted(next(c for c in COMMANDS if c.name == "pq").exit_codes)
    assert "  1  `export --check`: patches/ or vendor/ differ from the export" in listed
