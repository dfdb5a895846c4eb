"""The reduce contract end to end: real processes, real vLLM runner, dense float32 reference."""

import pytest

from moe_contract.cases import LAYOUTS, problems_for
from moe_contract.checks import (
    MODULES,
    RELATIVE_TOLERANCE,
    ContractViolation,
    assert_contract_holds,
    assert_off_by_tp_factor,
    max_backend_disagreement,
)
from moe_contract.launcher import ContractRun
from moe_contract.prepare_finalize_sources import PRISTINE, VENDORED, mutant_name
from moe_contract.problem import MoEProblem

# The first test of each layout pays for starting the ranks (about 30 s for four).
pytestmark = pytest.mark.timeout(240)

PROBLEMS = problems_for(LAYOUTS[0])


def _runner_flags(run: ContractRun, problem: MoEProblem, module: str, variant: str) -> set[bool]:
    return {run.result(problem, module, variant, rank).fused_output_is_reduced for rank in range(run.layout.world_size)}


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.case_id)
def test_patched_subtree_matches_dense_reference(contract_run: ContractRun, problem: MoEProblem) -> None:
    assert_contract_holds(contract_run, problem, VENDORED)
    for module in MODULES:
        assert _runner_flags(contract_run, problem, module, VENDORED) == {True}


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.case_id)
def test_pristine_v0_20_0_is_off_by_the_tp_factor(contract_run: ContractRun, problem: MoEProblem) -> None:
    assert_off_by_tp_factor(contract_run, problem, PRISTINE)
    for module in MODULES:
        assert _runner_flags(contract_run, problem, module, PRISTINE) == {False}
    if contract_run.layout.tp_size > 1:
        with pytest.raises(ContractViolation):
            assert_contract_holds(contract_run, problem, PRISTINE)
    else:
        # A TP group of one makes the extra all-reduce a no-op: the bug needs TP > 1.
        assert_contract_holds(contract_run, problem, PRISTINE)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.case_id)
def test_two_sided_and_one_sided_give_the_same_output(contract_run: ContractRun, problem: MoEProblem) -> None:
    two, one = MODULES
    assert _runner_flags(contract_run, problem, two, VENDORED) == _runner_flags(contract_run, problem, one, VENDORED)
    # Not bit-equal in bf16: torch.sum rounds once, the one-sided kernel after every add.
    assert max_backend_disagreement(contract_run, problem, VENDORED) <= RELATIVE_TOLERANCE[problem.payload_dtype]


@pytest.mark.parametrize("mutated_module", MODULES)
def test_contract_check_catches_output_is_reduced_turned_back_to_false(
    contract_run: ContractRun, mutated_module: str
) -> None:
    """Mutation check: the same assertion that passes on our subtree fails on each mutant."""
    variant = mutant_name(mutated_module)
    untouched = next(m for m in MODULES if m != mutated_module)
    caught = 0
    for problem in PROBLEMS:
        assert _runner_flags(contract_run, problem, mutated_module, variant) == {False}
        assert _runner_flags(contract_run, problem, untouched, variant) == {True}
        if contract_run.layout.tp_size > 1:
            with pytest.raises(ContractViolation, match=mutated_module):
                assert_contract_holds(contract_run, problem, variant)
            caught += 1
        else:
            assert_contract_holds(contract_run, problem, variant)
    assert caught == (len(PROBLEMS) if contract_run.layout.tp_size > 1 else 0)
