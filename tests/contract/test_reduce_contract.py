"""The reduce contract end to end: real processes, the installed vLLM's runner, dense float32 reference.

Each release decides the final TP all-reduce in its own place (moe_contract/vllm_layer.py,
`ReduceSite`), reached by one or more paths; every test below runs on every path the
installed release has.
"""

import pytest

from moe_contract.cases import LAYOUTS, problems_for
from moe_contract.checks import (
    MODULES,
    RELATIVE_TOLERANCE,
    ContractViolation,
    assert_contract_holds,
    assert_matches,
    assert_output_is_predicted,
    contract_gap,
    max_backend_disagreement,
    references,
)
from moe_contract.launcher import ContractRun
from moe_contract.paths import release_line
from moe_contract.prepare_finalize_sources import PRISTINE, VENDORED, mutant_name
from moe_contract.problem import MoEProblem, make_tokens, make_weights
from moe_contract.reference import shared_tp_partial

# A hang guard: the first test of each layout pays for the whole run (contract_run), one to
# five minutes on a loaded 2-core machine, twice that on a runner with two paths.
pytestmark = pytest.mark.timeout(900)

PROBLEMS = problems_for(LAYOUTS[0])


def _runner_flags(run: ContractRun, problem: MoEProblem, module: str, variant: str, path: str) -> set[bool]:
    return {
        run.result(problem, module, variant, rank, path).fused_output_is_reduced
        for rank in range(run.layout.world_size)
    }


def _contract_paths(run: ContractRun, problem: MoEProblem) -> list[str]:
    return [path for path in run.paths if contract_gap(path, problem, run.layout.tp_size) is None]


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.case_id)
def test_patched_subtree_matches_dense_reference(contract_run: ContractRun, problem: MoEProblem) -> None:
    paths = _contract_paths(contract_run, problem)
    assert paths or problem.shared_experts, "every problem without shared experts must be checked somewhere"
    for path in paths:
        assert_contract_holds(contract_run, problem, VENDORED, path)
    for path in contract_run.paths:
        for module in MODULES:
            assert _runner_flags(contract_run, problem, module, VENDORED, path) == {True}


@pytest.mark.parametrize("variant", [VENDORED, PRISTINE, *map(mutant_name, MODULES)])
def test_every_output_is_what_the_runner_flags_predict(contract_run: ContractRun, variant: str) -> None:
    """The harness models each release's reduce decision exactly, bug included."""
    for problem in PROBLEMS:
        for path in contract_run.paths:
            assert_output_is_predicted(contract_run, problem, variant, path)


def test_pristine_upstream_reduces_the_routed_output_tp_times_on_some_path(contract_run: ContractRun) -> None:
    """The bug itself, not just some error: with TP > 1 each pristine class gives
    `shared + tp x routed` for every problem on at least one path the release has."""
    layout = contract_run.layout
    if layout.tp_size == 1:
        pytest.skip("a TP group of one makes the extra all-reduce a no-op")
    for module in MODULES:
        doubled = []
        for path in contract_run.paths:
            try:
                for problem in PROBLEMS:
                    refs = references(problem)
                    expected = [
                        refs[layout.dp_rank(r)].shared + layout.tp_size * refs[layout.dp_rank(r)].routed
                        for r in range(layout.world_size)
                    ]
                    assert_matches(contract_run, problem, module, PRISTINE, path, expected, "shared + tp x routed")
            except ContractViolation:
                continue
            doubled.append(path)
        assert doubled, f"{module}: pristine never gives shared + tp x routed on {contract_run.paths}"


def test_pristine_upstream_breaks_the_contract_when_tp_is_larger_than_one(contract_run: ContractRun) -> None:
    broken: dict[str, set[str]] = {module: set() for module in MODULES}
    world = contract_run.layout.world_size
    for problem in PROBLEMS:
        for path in contract_run.paths:
            for module in MODULES:
                assert _runner_flags(contract_run, problem, module, PRISTINE, path) == {False}
                expected = [references(problem)[contract_run.layout.dp_rank(r)].total for r in range(world)]
                try:
                    assert_matches(contract_run, problem, module, PRISTINE, path, expected, "dense reference")
                except ContractViolation:
                    broken[module].add(path)
    if contract_run.layout.tp_size > 1:
        # The bug: both classes, on every path the release has, in some problem.
        assert all(paths == set(contract_run.paths) for paths in broken.values()), broken
    else:
        # A TP group of one makes every extra all-reduce a no-op: the bug needs TP > 1.
        assert broken == {module: set() for module in MODULES}


# A line with one FlashInfer all-to-all class has no second backend to compare (one skip per layout).
@pytest.mark.parametrize("problem", PROBLEMS if len(MODULES) > 1 else [], ids=lambda p: p.case_id)
def test_two_sided_and_one_sided_give_the_same_output(contract_run: ContractRun, problem: MoEProblem) -> None:
    two, one = MODULES
    for path in contract_run.paths:
        assert _runner_flags(contract_run, problem, two, VENDORED, path) == _runner_flags(
            contract_run, problem, one, VENDORED, path
        )
        # Not bit-equal in bf16: torch.sum rounds once, the one-sided kernel after every add.
        assert (
            max_backend_disagreement(contract_run, problem, VENDORED, path) <= RELATIVE_TOLERANCE[problem.payload_dtype]
        )


@pytest.mark.parametrize("mutated_module", MODULES)
def test_contract_check_catches_output_is_reduced_turned_back_to_false(
    contract_run: ContractRun, mutated_module: str
) -> None:
    """Mutation check: the same assertion that passes on our subtree fails on each mutant."""
    variant = mutant_name(mutated_module)
    untouched = [m for m in MODULES if m != mutated_module]
    caught: set[str] = set()
    for problem in PROBLEMS:
        for path in contract_run.paths:
            assert _runner_flags(contract_run, problem, mutated_module, variant, path) == {False}
            for module in untouched:
                assert _runner_flags(contract_run, problem, module, variant, path) == {True}
        for path in _contract_paths(contract_run, problem):
            try:
                assert_contract_holds(contract_run, problem, variant, path)
            except ContractViolation as violation:
                assert mutated_module in str(violation)
                caught.add(path)
    if contract_run.layout.tp_size > 1:
        assert caught == set(contract_run.paths)
    else:
        assert caught == set()


def test_where_the_model_reduces_the_fix_leaves_shared_experts_unreduced(contract_run: ContractRun) -> None:
    """A known gap, pinned so that a fix for it shows up here (see checks.contract_gap)."""
    layout = contract_run.layout
    gapped = {
        problem: [path for path in contract_run.paths if contract_gap(path, problem, layout.tp_size)]
        for problem in PROBLEMS
    }
    if not any(gapped.values()):
        pytest.skip(f"{contract_run.site['runner']} has no path with this gap at {layout.name}")
    for problem, paths in gapped.items():
        weights, tokens, refs = make_weights(problem), make_tokens(problem), references(problem)
        expected = [
            refs[layout.dp_rank(rank)].routed
            + shared_tp_partial(problem, weights, tokens[layout.dp_rank(rank)], layout.tp_rank(rank), layout.tp_size)
            for rank in range(layout.world_size)
        ]
        for path in paths:
            for module in MODULES:
                assert_matches(contract_run, problem, module, VENDORED, path, expected, "shared partial + routed")
            with pytest.raises(ContractViolation):
                assert_contract_holds(contract_run, problem, VENDORED, path)


def test_the_fix_leaves_classes_that_share_its_base_alone(contract_run: ContractRun) -> None:
    """Where a fixed class inherits output_is_reduced() from a base that an all-gather class
    shares (line flashinfer_cutlass), that class still says False, in ours as in pristine."""
    line = release_line()
    if not line.unchanged:
        pytest.skip(f"line {line.name}: no class shares a base with the fixed ones")
    expected = {name: False for _, name in line.unchanged}
    for by_variant in contract_run.unchanged:
        assert by_variant[VENDORED] == expected
        assert by_variant[PRISTINE] == expected
