"""GSM8K 5-shot prompts, byte for byte as lm-eval 0.4.x builds them for `--tasks gsm8k`.

Followed (lm-eval 0.4.13, lm_eval/tasks/gsm8k/gsm8k.yaml):
    doc_to_text: "Question: {{question}}\\nAnswer:"
    doc_to_target: "{{answer}}"            # the whole worked solution, "#### N" included
    training_split/fewshot_split: train, test_split: test, num_fewshot: 5
and the defaults in lm_eval/config/task.py (target_delimiter " ", fewshot_delimiter "\\n\\n").
lm_eval/api/task.py ConfigurableTask.fewshot_context + build_qa_turn render each shot as
text + target_delimiter + target + fewshot_delimiter, then the eval doc's text with no
delimiter after it, so the prompt ends in "Answer:".

Sampling (lm_eval/api/samplers.py ContextSampler.sample, evaluator.simple_evaluate):
one `random.Random(1234)` (fewshot_random_seed, DEFAULT_OTHER_SEED) per task; for every
test doc, in order, `rnd.sample(train_docs, 5)`. Because fewshot_split (train) differs from
test_split (test), no eval doc is excluded (eval_doc=None), so the draw is exactly
`rnd.sample(pool, 5)`. The shots therefore differ per question but are deterministic,
and doc i's shots depend on the draws for docs 0..i-1 -- which is why --limit N gives
the same first N prompts as the full run (lm-eval's --limit takes the first N docs too).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from release.gsm8k.dataset import GsmDoc

NUM_FEWSHOT = 5
FEWSHOT_SEED = 1234
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"
# gsm8k.yaml generation_kwargs: until, do_sample false, temperature 0.0; lm-eval's API
# models default max_gen_toks to 256 (lm_eval/models/api_models.py).
STOP_SEQUENCES: tuple[str, ...] = ("Question:", "</s>", "<|im_end|>")
MAX_GEN_TOKENS = 256


def doc_to_text(doc: GsmDoc) -> str:
    return f"Question: {doc.question}\nAnswer:"


def render_shot(doc: GsmDoc) -> str:
    return doc_to_text(doc) + TARGET_DELIMITER + doc.answer + FEWSHOT_DELIMITER


def sample_fewshot(
    eval_count: int, pool: Sequence[GsmDoc], num_fewshot: int = NUM_FEWSHOT, seed: int = FEWSHOT_SEED
) -> list[list[GsmDoc]]:
    """The shots for the first `eval_count` test docs, drawn as lm-eval draws them."""
    if num_fewshot > len(pool):
        raise ValueError(f"{num_fewshot} shots asked from a pool of {len(pool)}")
    rnd = random.Random(seed)
    pool_list = list(pool)
    return [rnd.sample(pool_list, num_fewshot) if num_fewshot else [] for _ in range(eval_count)]


def build_prompt(doc: GsmDoc, shots: Sequence[GsmDoc]) -> str:
    return "".join(render_shot(shot) for shot in shots) + doc_to_text(doc)


def build_prompts(
    test_docs: Sequence[GsmDoc],
    train_docs: Sequence[GsmDoc],
    num_fewshot: int = NUM_FEWSHOT,
    seed: int = FEWSHOT_SEED,
) -> list[str]:
    shots_per_doc = sample_fewshot(len(test_docs), train_docs, num_fewshot, seed)
    return [build_prompt(doc, shots) for doc, shots in zip(test_docs, shots_per_doc, strict=True)]
