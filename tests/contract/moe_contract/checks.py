"""The contract as assertions over a finished run, shared by the tests and the mutation check."""

import functools

import torch

from .launcher import ContractRun, RankResult
from .layout import ParallelLayout
from .paths import release_line
from .problem import MoEProblem, make_tokens, make_weights
from .reference import ReferenceOutput, dense_reference, shared_tp_partial
from .vllm_layer import LAYER_PATH, MODEL_PATH, RUNNER_PATH

# Largest per-token relative error ||out - expected|| / ||expected||. bf16: every operand,
# the intermediate activation, each expert output, each payload-dtype add of the top-k
# sum and of the TP reduce round to 8 significant bits (unit roundoff 2^-9); measured
# worst case 1.5e-2 across the suite, 4e-2 leaves room for other seeds and stays far
# below the bug, whose error is ||routed|| / ||routed + shared|| (0.3 to 1.0 here).
# float32: measured 7e-7.
RELATIVE_TOLERANCE = {"bfloat16": 4e-2, "float32": 1e-5}
# The fixed classes of the installed vLLM's line, by module key (paths.ReleaseLine).
MODULES = release_line().modules


class ContractViolation(AssertionError):
    """An output disagrees with what the reduce contract predicts."""


@functools.cache
def references(problem: MoEProblem) -> tuple[ReferenceOutput, ...]:
    """The dense reference of each DP rank's tokens, computed once per problem in this process.

    Every check of every layout and variant compares with the same references: computed again
    for each, they were most of a contract session's time (576 dense references per check of
    one layout, 4 ms of CPU each on two loaded cores). The tensors are never changed in place.
    """
    weights = make_weights(problem)
    return tuple(dense_reference(problem, weights, tokens) for tokens in make_tokens(problem))


@functools.cache
def shared_partials(problem: MoEProblem, layout: ParallelLayout) -> tuple[torch.Tensor, ...]:
    """Each rank's shared-expert output before any all-reduce (zeros without shared experts), once per problem."""
    weights, tokens = make_weights(problem), make_tokens(problem)
    return tuple(
        shared_tp_partial(problem, weights, tokens[layout.dp_rank(rank)], layout.tp_rank(rank), layout.tp_size)
        for rank in range(layout.world_size)
    )


def worst_row_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    if actual.shape != expected.shape:
        raise ContractViolation(f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if actual.shape[0] == 0:
        return 0.0
    scale = expected.norm(dim=1).clamp_min(1e-12)
    return float(((actual - expected).norm(dim=1) / scale).max())


def contract_gap(path: str, problem: MoEProblem, tp_size: int) -> str | None:
    """Why a fixed subtree cannot meet the contract on this path, or None where it must.

    A model that builds its MoE layer with reduce_results=False adds its shared experts'
    TP-partial output to the routed output and then asks the runner whether to all-reduce
    (DefaultMoERunner.maybe_all_reduce_tensor_model_parallel). Once output_is_reduced()
    is True the runner says no, so the shared partial sums are never reduced: patch 0001
    alone does not fix these models on releases with that runner.
    """
    if path == MODEL_PATH and problem.shared_experts and tp_size > 1:
        return "reduce_results=False model path: shared experts' TP partials are never all-reduced"
    return None


def predicted_output(
    path: str, facts: RankResult, reference: ReferenceOutput, shared_partial: torch.Tensor, tp_size: int
) -> torch.Tensor:
    """The block output that the release's reduce decision implies, from the flags it reported.

    Read off the runners' code: MoERunner.forward (_maybe_reduce_shared_expert_output,
    _maybe_reduce_final_output); SharedFusedMoE.forward and DefaultMoERunner._maybe_reduce_output
    (layer path); the models' own final maybe_all_reduce_tensor_model_parallel (model path).
    """
    total, tp_times_routed = reference.total, reference.shared + tp_size * reference.routed
    if tp_size == 1:
        return total  # every all-reduce over a TP group of one is the identity
    reduced = facts.fused_output_is_reduced
    if path == RUNNER_PATH:
        return total if reduced else tp_times_routed
    if path == LAYER_PATH:
        if reduced:
            return total  # shared output reduced early, the runner's reduce skipped
        # DP-chunked backends skip the runner's reduce: the shared partials stay unreduced.
        if facts.dp_chunking:
            return shared_partial + reference.routed
        # The op's reduce covers the shared output only where the shared experts run inside
        # it; SharedFusedMoE.forward leaves the ones it runs itself unreduced.
        return tp_times_routed if facts.shared_in_op else shared_partial + tp_size * reference.routed
    if path == MODEL_PATH:
        return shared_partial + reference.routed if reduced else tp_times_routed
    raise ValueError(f"unknown path {path!r}")


def assert_matches(
    run: ContractRun,
    problem: MoEProblem,
    module: str,
    variant: str,
    path: str,
    expected_by_rank: list[torch.Tensor],
    what: str,
) -> None:
    tolerance = RELATIVE_TOLERANCE[problem.payload_dtype]
    for rank in range(run.layout.world_size):
        result = run.result(problem, module, variant, rank, path)
        if result.output_dtype != str(problem.dtype):
            raise ContractViolation(f"rank {rank}: output dtype {result.output_dtype}, want {problem.dtype}")
        error = worst_row_error(result.output, expected_by_rank[rank])
        if error > tolerance:
            raise ContractViolation(
                f"{run.layout.name} {problem.case_id} {module} [{variant}] {path} path, rank {rank}: "
                f"{what}: relative error {error:.3g} > {tolerance:g} "
                f"(runner saw output_is_reduced={result.fused_output_is_reduced})"
            )


def _by_rank(run: ContractRun, problem: MoEProblem) -> list[ReferenceOutput]:
    refs = references(problem)
    return [refs[run.layout.dp_rank(rank)] for rank in range(run.layout.world_size)]


def assert_contract_holds(run: ContractRun, problem: MoEProblem, variant: str, path: str) -> None:
    """Every fixed class gives the reference output: routed output counted once, shared reduced once."""
    expected = [ref.total for ref in _by_rank(run, problem)]
    for module in MODULES:
        assert_matches(run, problem, module, variant, path, expected, "output != dense reference")


def assert_output_is_predicted(run: ContractRun, problem: MoEProblem, variant: str, path: str) -> None:
    """Every rank's output is what the runner's own flags say vLLM computes (bug or no bug)."""
    layout = run.layout
    partials = shared_partials(problem, layout)
    for module in MODULES:
        expected = []
        for rank, ref in enumerate(_by_rank(run, problem)):
            partial = partials[rank]
            facts = run.result(problem, module, variant, rank, path)
            expected.append(predicted_output(path, facts, ref, partial, layout.tp_size))
        assert_matches(run, problem, module, variant, path, expected, "output != what the runner's flags predict")


def max_backend_disagreement(run: ContractRun, problem: MoEProblem, variant: str, path: str) -> float:
    two, one = MODULES
    return max(
        worst_row_error(
            run.result(problem, one, variant, rank, path).output,
            run.result(problem, two, variant, rank, path).output,
        )
        for rank in range(run.layout.world_size)
    )
