"""The suite's matrix: layouts and problems."""

import itertools

from .layout import ParallelLayout
from .problem import MoEProblem

LAYOUTS = (
    ParallelLayout(world_size=2, tp_size=1),  # -dp 2 --enable-expert-parallel
    ParallelLayout(world_size=4, tp_size=2),  # -tp 2 -dp 2 --enable-expert-parallel (the report)
)

# Uneven DP chunks, including a rank with no tokens and one with a single token.
TOKENS_BY_SEED = {0: (0, 5), 1: (1, 6), 2: (7, 3)}


def problems_for(layout: ParallelLayout) -> tuple[MoEProblem, ...]:
    problems = []
    for seed, dtype, top_k, shared in itertools.product(
        TOKENS_BY_SEED, ("bfloat16", "float32"), (1, 2, 8), (True, False)
    ):
        tokens = TOKENS_BY_SEED[seed]
        if layout.dp_size != len(tokens):
            raise ValueError(f"token patterns are written for DP 2, not {layout.name}")
        problems.append(MoEProblem(seed, dtype, top_k, shared, tokens))
    return tuple(problems)
