"""The checks' own cost: what they compare with is computed once per problem, not once per check."""

from typing import Any

import pytest

from moe_contract import checks, reference
from moe_contract.cases import LAYOUTS
from moe_contract.problem import MoEProblem, make_tokens, make_weights

pytestmark = [pytest.mark.timeout(60), pytest.mark.any_release]


def test_each_problems_references_and_shared_partials_are_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A problem no other test asks for, so that nothing has computed it before this test.
    problem = MoEProblem(seed=97, payload_dtype="float32", top_k=2, shared_experts=True, tokens_per_dp_rank=(2, 3))
    dense: list[tuple[Any, ...]] = []
    partial: list[tuple[Any, ...]] = []
    real_dense, real_partial = reference.dense_reference, reference.shared_tp_partial

    def counted_dense(*args: Any) -> Any:
        dense.append(args)
        return real_dense(*args)

    def counted_partial(*args: Any) -> Any:
        partial.append(args)
        return real_partial(*args)

    monkeypatch.setattr(checks, "dense_reference", counted_dense)
    monkeypatch.setattr(checks, "shared_tp_partial", counted_partial)
    layout = LAYOUTS[-1]

    first, again = checks.references(problem), checks.references(problem)
    partials, partials_again = checks.shared_partials(problem, layout), checks.shared_partials(problem, layout)

    assert again is first and partials_again is partials
    assert len(dense) == len(problem.tokens_per_dp_rank) == len(first)  # one per DP rank, once
    assert len(partial) == layout.world_size == len(partials)
    # What is kept is what the reference computes.
    weights, tokens = make_weights(problem), make_tokens(problem)
    for rank_tokens, kept in zip(tokens, first, strict=True):
        fresh = real_dense(problem, weights, rank_tokens)
        assert kept.routed.equal(fresh.routed) and kept.shared.equal(fresh.shared)
