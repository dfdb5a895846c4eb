"""One MoE layer's problem: shapes, deterministic weights and tokens, top-k routing.

Every process regenerates the same tensors from the seed, so nothing large crosses
process boundaries and the reference sees exactly what the ranks see.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .layout import HarnessInputError, ParallelLayout

PAYLOAD_DTYPES: dict[str, torch.dtype] = {"bfloat16": torch.bfloat16, "float32": torch.float32}


@dataclass(frozen=True)
class MoEProblem:
    seed: int
    payload_dtype: str
    top_k: int
    shared_experts: bool
    tokens_per_dp_rank: tuple[int, ...]
    num_experts: int = 16
    hidden: int = 32
    intermediate: int = 24
    shared_intermediate: int = 32

    @property
    def dtype(self) -> torch.dtype:
        return PAYLOAD_DTYPES[self.payload_dtype]

    @property
    def case_id(self) -> str:
        tokens = "-".join(map(str, self.tokens_per_dp_rank))
        shared = "shared" if self.shared_experts else "noshared"
        return f"s{self.seed}-{self.payload_dtype}-top{self.top_k}-{shared}-tok{tokens}"

    def validate_for(self, layout: ParallelLayout) -> None:
        if self.payload_dtype not in PAYLOAD_DTYPES:
            raise HarnessInputError(f"payload dtype {self.payload_dtype!r} not in {list(PAYLOAD_DTYPES)}")
        if not 1 <= self.top_k <= self.num_experts:
            raise HarnessInputError(
                f"top_k {self.top_k} must be between 1 and the number of experts {self.num_experts}"
            )
        if self.num_experts % layout.ep_size != 0:
            raise HarnessInputError(f"{self.num_experts} experts cannot be split evenly over EP size {layout.ep_size}")
        if len(self.tokens_per_dp_rank) != layout.dp_size:
            raise HarnessInputError(
                f"tokens_per_dp_rank has {len(self.tokens_per_dp_rank)} entries, DP size is {layout.dp_size}"
            )
        if any(n < 0 for n in self.tokens_per_dp_rank):
            raise HarnessInputError(f"negative token count in {self.tokens_per_dp_rank}")
        if self.shared_intermediate % layout.tp_size != 0:
            raise HarnessInputError(
                f"shared intermediate {self.shared_intermediate} not divisible by TP {layout.tp_size}"
            )


@dataclass(frozen=True)
class MoEWeights:
    w13: torch.Tensor  # [experts, 2 * intermediate, hidden]: gate rows, then up rows
    w2: torch.Tensor  # [experts, hidden, intermediate]
    shared_w13: torch.Tensor  # [2 * shared_intermediate, hidden]
    shared_w2: torch.Tensor  # [hidden, shared_intermediate]


@dataclass(frozen=True)
class DpRankTokens:
    hidden_states: torch.Tensor  # [tokens, hidden], float32
    router_logits: torch.Tensor  # [tokens, experts], float32


def make_weights(problem: MoEProblem) -> MoEWeights:
    gen = torch.Generator().manual_seed(problem.seed)
    e, h, i, s = problem.num_experts, problem.hidden, problem.intermediate, problem.shared_intermediate
    return MoEWeights(
        w13=torch.randn(e, 2 * i, h, generator=gen) / h**0.5,
        w2=torch.randn(e, h, i, generator=gen) / i**0.5,
        shared_w13=torch.randn(2 * s, h, generator=gen) / h**0.5,
        shared_w2=torch.randn(h, s, generator=gen) / s**0.5,
    )


def make_tokens(problem: MoEProblem) -> list[DpRankTokens]:
    gen = torch.Generator().manual_seed(10_000 + problem.seed)
    return [
        DpRankTokens(
            hidden_states=torch.randn(n, problem.hidden, generator=gen),
            router_logits=2.0 * torch.randn(n, problem.num_experts, generator=gen),
        )
        for n in problem.tokens_per_dp_rank
    ]


def route_top_k(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k then softmax over the chosen logits (vLLM's RoutingMethodType.Renormalize)."""
    values, ids = torch.topk(router_logits.float(), top_k, dim=-1)
    return torch.softmax(values, dim=-1), ids


def gated_silu_mlp(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    gate, up = (x @ w13.transpose(-1, -2)).chunk(2, dim=-1)
    return (F.silu(gate) * up) @ w2.transpose(-1, -2)


def shared_expert_tp_shard(weights: MoEWeights, tp_rank: int, tp_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's column/row-parallel slice of the shared expert; partial outputs sum over TP."""
    s = weights.shared_w2.shape[1]
    per_rank = s // tp_size
    cols = slice(tp_rank * per_rank, (tp_rank + 1) * per_rank)
    gate, up = weights.shared_w13[:s], weights.shared_w13[s:]
    w13 = torch.cat([gate[cols], up[cols]], dim=0)
    return w13, weights.shared_w2[:, cols]
