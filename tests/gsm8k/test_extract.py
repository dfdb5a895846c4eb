"""Answer extraction on tricky completions, against lm-eval 0.4.13's gsm8k regexes (see release/gsm8k/extract.py)."""

from __future__ import annotations

import pytest

from release.gsm8k.extract import INVALID, exact_match, extract_flexible, extract_strict, normalize


@pytest.mark.parametrize(
    ("completion", "strict", "flexible"),
    [
        (" 3 + 4 = 7\n#### 7", "7", "7"),
        # Thousands separators are kept by the regex and dropped by the exact-match normalisation.
        (" so 1,234 in all.\n#### 1,234", "1,234", "1,234"),
        # "$" is not in the strict pattern: "#### $1,200" has no strict match.
        (" The bike costs $1,200.\n#### $1,200", INVALID, "$1,200"),
        # Units after the number: flexible takes the last number-like run, which is the "5" of "5 km"?
        (" She walks 12 km a day, #### 60 km in 5 days", "60", "5"),
        # Several ####: strict takes the first, flexible the last number anywhere.
        (" #### 10\nwait, correction\n#### 12", "10", "12"),
        (" It was -3 degrees.\n#### -3", "-3", "-3"),
        # A trailing full stop is captured by [0-9.,]+; normalisation drops it later.
        (" The answer is 42.", INVALID, "42."),
        (" I am not sure how to solve this.", INVALID, INVALID),
        ("", INVALID, INVALID),
        # A lone digit only matches flexible's second alternative.
        (" x is 7 apples", INVALID, "7"),
    ],
)
def test_extract_strict_and_flexible(completion: str, strict: str, flexible: str) -> None:
    assert extract_strict(completion) == strict
    assert extract_flexible(completion) == flexible


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("1,234", "1200 + 34 = 1234\n#### 1,234", True),
        ("$1,234", "steps\n#### 1234", True),
        ("42.", "#### 42", True),  # only a trailing "." is ignored
        ("4.5", "9 / 2 = 4.5\n#### 4.5", True),
        ("45", "9 / 2 = 4.5\n#### 4.5", False),  # an inner "." is not ignored
        ("-3", "#### -3", True),
        ("3", "#### -3", False),
        (INVALID, "#### 7", False),
        # Only the text after the LAST "#### " of the reference counts ((?s).*#### is greedy).
        ("8", "#### 7 then #### 8", True),
    ],
)
def test_exact_match_normalisation(prediction: str, reference: str, expected: bool) -> None:
    assert exact_match(prediction, reference) is expected


def test_normalize_lowercases_and_strips_ignored_patterns() -> None:
    assert normalize("$1,000.") == "1000"
    assert normalize("[INVALID]") == "[invalid]"
