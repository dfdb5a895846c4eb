"""Scores and standard errors against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from release.gsm8k.scoring import FLEXIBLE, STRICT, mean_stderr, score_completions


def test_mean_stderr_hand_computed() -> None:
    # scores 1,1,1,0: mean 0.75, sample variance (3*0.0625 + 0.5625)/3 = 0.25, stderr sqrt(0.25)/2 = 0.25
    assert mean_stderr([1.0, 1.0, 1.0, 0.0]) == pytest.approx(0.25)
    # 0/1 scores: stderr = sqrt(p(1-p)/(n-1)); p = 0.4, n = 5 -> sqrt(0.24/4)
    assert mean_stderr([1, 0, 1, 0, 0]) == pytest.approx(math.sqrt(0.06))
    assert mean_stderr([1.0, 1.0]) == 0.0
    assert mean_stderr([1.0]) is None


def test_score_completions_strict_and_flexible_differ() -> None:
    references = ["3 + 4 = 7\n#### 7", "#### 1,234", "#### -3", "#### 100"]
    completions = [
        " 3 + 4 = 7\n#### 7",  # both right
        " total is 1,234",  # strict: no "####" -> wrong; flexible: 1,234 -> right
        " #### -3 but maybe 2",  # strict right; flexible takes the last number, 2 -> wrong
        " #### 99",  # both wrong
    ]
    items, metrics = score_completions(completions, references)
    assert [item.correct[STRICT] for item in items] == [True, False, True, False]
    assert [item.correct[FLEXIBLE] for item in items] == [True, True, False, False]
    assert metrics[STRICT].value == pytest.approx(0.5)
    assert metrics[FLEXIBLE].value == pytest.approx(0.5)
    # p = 0.5, n = 4: sqrt(0.25 / 3) / 1 ... i.e. sqrt(4 * 0.25 / 3) / sqrt(4)
    assert metrics[STRICT].stderr == pytest.approx(math.sqrt(1 / 3) / 2)
    assert metrics[STRICT].n == 4
    assert items[1].extracted == {STRICT: "[invalid]", FLEXIBLE: "1,234"}


def test_score_completions_needs_matching_lengths() -> None:
    with pytest.raises(ValueError):
        score_completions(["#### 1"], [])
