"""The contract as assertions over a finished run, shared by the tests and the mutation check."""

import torch

from .launcher import ContractRun
from .paths import FLASHINFER_NVLINK_CLASSES
from .problem import MoEProblem, make_tokens, make_weights
from .reference import ReferenceOutput, dense_reference

# Largest per-token relative error ||out - expected|| / ||expected||. bf16: every operand,
# the intermediate activation, each expert output, each payload-dtype add of the top-k
# sum and of the TP reduce round to 8 significant bits (unit roundoff 2^-9); measured
# worst case 1.5e-2 across the suite, 4e-2 leaves room for other seeds and stays far
# below the bug, whose error is ||routed|| / ||routed + shared|| (0.3 to 1.0 here).
# float32: measured 7e-7.
RELATIVE_TOLERANCE = {"bfloat16": 4e-2, "float32": 1e-5}
MODULES = tuple(FLASHINFER_NVLINK_CLASSES)


class ContractViolation(AssertionError):
    """An output disagrees with what the reduce contract predicts."""


def references(problem: MoEProblem) -> list[ReferenceOutput]:
    weights = make_weights(problem)
    return [dense_reference(problem, weights, tokens) for tokens in make_tokens(problem)]


def worst_row_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    if actual.shape != expected.shape:
        raise ContractViolation(f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if actual.shape[0] == 0:
        return 0.0
    scale = expected.norm(dim=1).clamp_min(1e-12)
    return float(((actual - expected).norm(dim=1) / scale).max())


def assert_matches(
    run: ContractRun,
    problem: MoEProblem,
    module: str,
    variant: str,
    expected_by_dp_rank: list[torch.Tensor],
    what: str,
) -> None:
    tolerance = RELATIVE_TOLERANCE[problem.payload_dtype]
    for rank in range(run.layout.world_size):
        result = run.result(problem, module, variant, rank)
        if result.output_dtype != str(problem.dtype):
            raise ContractViolation(f"rank {rank}: output dtype {result.output_dtype}, want {problem.dtype}")
        error = worst_row_error(result.output, expected_by_dp_rank[run.layout.dp_rank(rank)])
        if error > tolerance:
            raise ContractViolation(
                f"{run.layout.name} {problem.case_id} {module} [{variant}] rank {rank}: "
                f"{what}: relative error {error:.3g} > {tolerance:g} "
                f"(runner saw output_is_reduced={result.fused_output_is_reduced})"
            )


def assert_contract_holds(run: ContractRun, problem: MoEProblem, variant: str) -> None:
    """Both classes give the reference output: routed output counted once, shared reduced once."""
    expected = [ref.total for ref in references(problem)]
    for module in MODULES:
        assert_matches(run, problem, module, variant, expected, "output != dense reference")


def assert_off_by_tp_factor(run: ContractRun, problem: MoEProblem, variant: str) -> None:
    """The v0.20.0 bug: routed output all-reduced again, so it is tp_size times too large."""
    tp = run.layout.tp_size
    expected = [ref.shared + tp * ref.routed for ref in references(problem)]
    for module in MODULES:
        assert_matches(run, problem, module, variant, expected, f"output != shared + {tp} x routed")


def max_backend_disagreement(run: ContractRun, problem: MoEProblem, variant: str) -> float:
    two, one = MODULES
    return max(
        worst_row_error(
            run.result(problem, one, variant, rank).output,
            run.result(problem, two, variant, rank).output,
        )
        for rank in range(run.layout.world_size)
    )
