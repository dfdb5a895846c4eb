"""Prompts in lm-eval 0.4.13's gsm8k 5-shot format (release/gsm8k/prompts.py cites the source)."""

from __future__ import annotations

import random

import pytest

from release.gsm8k.dataset import GsmDoc, default_data_dir, load_splits
from release.gsm8k.prompts import build_prompt, build_prompts, doc_to_text, sample_fewshot

SHOT_A = GsmDoc("What is 1 + 1?", "1 + 1 = 2\n#### 2")
SHOT_B = GsmDoc("What is 2 * 3?", "2 * 3 = 6\n#### 6")
EVAL = GsmDoc("What is 5 - 2?", "5 - 2 = 3\n#### 3")


def test_doc_to_text_matches_the_task_yaml_template() -> None:
    # gsm8k.yaml: doc_to_text: "Question: {{question}}\nAnswer:"
    assert doc_to_text(EVAL) == "Question: What is 5 - 2?\nAnswer:"


def test_prompt_layout_written_out_by_hand() -> None:
    expected = (
        "Question: What is 1 + 1?\nAnswer: 1 + 1 = 2\n#### 2\n\n"
        "Question: What is 2 * 3?\nAnswer: 2 * 3 = 6\n#### 6\n\n"
        "Question: What is 5 - 2?\nAnswer:"
    )
    assert build_prompt(EVAL, [SHOT_A, SHOT_B]) == expected


def test_zero_shot_prompt_is_the_question_alone() -> None:
    assert build_prompts([EVAL], [SHOT_A], num_fewshot=0) == ["Question: What is 5 - 2?\nAnswer:"]


def test_fewshot_draws_differ_per_question_and_repeat_across_runs() -> None:
    pool = [GsmDoc(f"q{n}", f"#### {n}") for n in range(50)]
    first, again = sample_fewshot(20, pool), sample_fewshot(20, pool)
    assert first == again
    assert all(len(shots) == 5 and len(set(shots)) == 5 for shots in first)
    assert len({tuple(shots) for shots in first}) > 1  # one shared stream, not one draw reused
    assert sample_fewshot(20, pool, seed=1) != first


def test_limit_gives_the_same_first_prompts_as_the_full_run() -> None:
    pool = [GsmDoc(f"q{n}", f"#### {n}") for n in range(30)]
    tests = [GsmDoc(f"t{n}", f"#### {n}") for n in range(12)]
    assert build_prompts(tests[:4], pool) == build_prompts(tests, pool)[:4]


def test_too_small_pool_is_refused() -> None:
    with pytest.raises(ValueError):
        sample_fewshot(1, [SHOT_A, SHOT_B])


# Train-split line numbers (0-based) of the shots lm-eval 0.4.13 draws for the first three
# test questions: recorded by running lm_eval.api.samplers.ContextSampler(train, rnd=1234)
# .sample(5) three times on shared/data/gsm8k/train.jsonl.
LM_EVAL_SHOT_INDICES = [[6374, 3610, 957, 61, 742], [7462, 6610, 4769, 286, 5501], [5677, 687, 806, 6279, 2905]]


@pytest.mark.skipif(not (default_data_dir() / "train.jsonl").is_file(), reason="shared/data/gsm8k not beside the repo")
def test_shots_on_the_real_train_split_are_lm_evals() -> None:
    test_docs, train_docs = load_splits(default_data_dir())
    shots = sample_fewshot(3, train_docs)
    position = {doc: index for index, doc in enumerate(train_docs)}
    assert [[position[doc] for doc in group] for group in shots] == LM_EVAL_SHOT_INDICES
    prompt = build_prompts(test_docs[:1], train_docs)[0]
    assert prompt.count("Question: ") == 6
    assert prompt.endswith(f"Question: {test_docs[0].question}\nAnswer:")
    assert prompt.startswith(f"Question: {train_docs[LM_EVAL_SHOT_INDICES[0][0]].question}\nAnswer: ")


def test_random_sample_algorithm_is_what_the_golden_assumes() -> None:
    # Guards the golden above against a change in CPython's random.sample.
    assert random.Random(1234).sample(range(100), 3) == RANDOM_1234_SAMPLE


RANDOM_1234_SAMPLE = [99, 56, 14]


# sha256 of "\0".join(the first 20 gsm8k contexts) as lm-eval 0.4.13 itself built them:
# ConfigurableTask(gsm8k.yaml with dataset_path json over shared/data/gsm8k), set_fewshot_seed(1234),
# build_all_requests(limit=20), instance.args[0] in doc order. Recorded 2026-12-02.
LM_EVAL_FIRST_20_CONTEXTS_SHA256 = "f0fbacc3eb1bea383e9fe8ae47ac9d778239426c09e0b3066bc2bff82094f6eb"


@pytest.mark.skipif(not (default_data_dir() / "test.jsonl").is_file(), reason="shared/data/gsm8k not beside the repo")
def test_first_20_prompts_are_byte_identical_to_lm_evals() -> None:
    import hashlib

    test_docs, train_docs = load_splits(default_data_dir())
    joined = "\0".join(build_prompts(test_docs[:20], train_docs))
    assert hashlib.sha256(joined.encode()).hexdigest() == LM_EVAL_FIRST_20_CONTEXTS_SHA256
