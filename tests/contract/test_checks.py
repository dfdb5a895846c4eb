"""The checks' own cost: what they compare with is computed once per problem, not once per check."""

import pytest

from moe_contract import checks
from moe_contract.cases import LAYOUTS
from moe_contract.problem import MoEProblem

pytestmark = [pytest.mark.timeout(60), pytest.mark.any_release]


def test_each_problems_references_and_shared_partials_are_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A problem no other test asks for, so that nothing has computed it before this test.
    problem = MoEProblem(seed=97, payload_dtype="float32", top_k=2, shared_experts=True, tokens_per_dp_rank=(2, 3))
    dense, partial = [], []
    real_dense, real_partial = checks.dense_reference, checks.shared_tp_partial
    monkeypatch.setattr(checks, "dense_reference", lambda *args: dense.append(args) or real_dense(*args))
    monkeypatch.setattr(checks, "shared_tp_partial", lambda *args: partial.append(args) or real_partial(*args))
    layout = LAYOUTS[-1]

    first, again = checks.references(problem), checks.references(problem)
    partials, partials_again = checks.shared_partials(problem, layout), checks.shared_partials(problem, layout)

    assert again is first and partials_again is partials
    assert len(dense) == len(problem.tokens_per_dp_rank) == len(first)  # one per DP rank, once
    assert len(partial) == layout.world_size == len(partials)
    # What is kept is what the reference computes.
    weights, tokens = checks.make_weights(problem), checks.make_tokens(problem)
    for rank_tokens, kept in zip(tokens, first, strict=True):
        fresh = real_dense(problem, weights, rank_tokens)
        assert kept.routed.equal(fresh.routed) and kept.shared.equal(fresh.shared)
