"""Exact-match accuracy with lm-eval's standard error (the mean's closed form).

lm-eval 0.4.13 lm_eval/api/metrics.py: aggregation "mean", stderr mean_stderr =
sample_stddev / sqrt(n) with sample_stddev using n - 1 (Bessel). For 0/1 scores that is
sqrt(p * (1 - p) / (n - 1)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from release.gsm8k.extract import exact_match, extract_flexible, extract_strict

STRICT = "strict-match"
FLEXIBLE = "flexible-extract"
METRICS: tuple[str, ...] = (STRICT, FLEXIBLE)
_EXTRACTORS = {STRICT: extract_strict, FLEXIBLE: extract_flexible}


@dataclass(frozen=True)
class MetricResult:
    value: float
    stderr: float | None  # None where n < 2: the sample stddev is undefined
    n: int

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


@dataclass(frozen=True)
class ScoredItem:
    index: int
    completion: str
    reference: str
    extracted: dict[str, str]
    correct: dict[str, bool]


def mean_stderr(scores: Sequence[float]) -> float | None:
    count = len(scores)
    if count < 2:
        return None
    mean = sum(scores) / count
    sample_variance = sum((score - mean) ** 2 for score in scores) / (count - 1)
    return math.sqrt(sample_variance) / math.sqrt(count)


def score_item(index: int, completion: str, reference: str) -> ScoredItem:
    extracted = {name: extract(completion) for name, extract in _EXTRACTORS.items()}
    correct = {name: exact_match(value, reference) for name, value in extracted.items()}
    return ScoredItem(index, completion, reference, extracted, correct)


def aggregate(items: Sequence[ScoredItem]) -> dict[str, MetricResult]:
    if not items:
        raise ValueError("no items to score")
    results: dict[str, MetricResult] = {}
    for name in METRICS:
        scores = [1.0 if item.correct[name] else 0.0 for item in items]
        results[name] = MetricResult(sum(scores) / len(scores), mean_stderr(scores), len(scores))
    return results


def score_completions(
    completions: Sequence[str], references: Sequence[str]
) -> tuple[list[ScoredItem], dict[str, MetricResult]]:
    items = [
        score_item(index, completion, reference)
        for index, (completion, reference) in enumerate(zip(completions, references, strict=True))
    ]
    return items, aggregate(items)
