"""Answer extraction and normalisation, as lm-eval 0.4.x's gsm8k task does it.

Followed (lm-eval 0.4.13):
  lm_eval/tasks/gsm8k/gsm8k.yaml filter_list
    strict-match:     regex "#### (\\-?[0-9\\.\\,]+)", first match, then take_first
    flexible-extract: regex "(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select -1 (the LAST
                      match), then take_first
  lm_eval/filters/extraction.py RegexFilter.apply: re.findall, pick match[group_select];
    a tuple (several groups) becomes its first non-empty group; .strip(); no match gives
    the fallback "[invalid]".
  gsm8k.yaml metric exact_match: ignore_case true, ignore_punctuation false,
    regexes_to_ignore [",", "\\$", "(?s).*#### ", "\\.$"], applied in that order with
    re.sub to both prediction and reference (lm_eval/api/metrics.py exact_match_hf_evaluate).
"""

from __future__ import annotations

import re

INVALID = "[invalid]"

STRICT_PATTERN = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_PATTERN = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
IGNORED_PATTERNS: tuple[str, ...] = (",", r"\$", r"(?s).*#### ", r"\.$")


def _regex_filter(pattern: re.Pattern[str], text: str, group_select: int) -> str:
    matches = pattern.findall(text)
    if not matches:
        return INVALID
    # findall gives strings for a pattern with at most one group, tuples for several.
    chosen: str | tuple[str, ...] = matches[group_select]
    if isinstance(chosen, tuple):
        non_empty = [group for group in chosen if group]
        chosen = non_empty[0] if non_empty else INVALID
    return chosen.strip()


def extract_strict(completion: str) -> str:
    """The number after the first "#### ", or "[invalid]"."""
    return _regex_filter(STRICT_PATTERN, completion, 0)


def extract_flexible(completion: str) -> str:
    """The last number-like run in the completion, or "[invalid]"."""
    return _regex_filter(FLEXIBLE_PATTERN, completion, -1)


def normalize(text: str) -> str:
    for pattern in IGNORED_PATTERNS:
        text = re.sub(pattern, "", text)
    return text.lower()


def exact_match(prediction: str, reference: str) -> bool:
    """`reference` is the full worked solution; its "... #### " prefix is ignored like lm-eval does."""
    return normalize(prediction) == normalize(reference)
