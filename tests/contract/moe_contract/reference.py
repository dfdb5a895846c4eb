"""Dense single-process float32 reference for one DP rank's tokens."""

from dataclasses import dataclass

import torch

from .problem import DpRankTokens, MoEProblem, MoEWeights, gated_silu_mlp, route_top_k, shared_expert_tp_shard


@dataclass(frozen=True)
class ReferenceOutput:
    routed: torch.Tensor  # sum over top-k of weight * expert(x)
    shared: torch.Tensor  # zeros when the problem has no shared experts

    @property
    def total(self) -> torch.Tensor:
        return self.routed + self.shared


def dense_reference(problem: MoEProblem, weights: MoEWeights, tokens: DpRankTokens) -> ReferenceOutput:
    x = tokens.hidden_states.float()
    topk_weights, topk_ids = route_top_k(tokens.router_logits, problem.top_k)
    # Every expert on every token, then a dense gate matrix: no dispatch, no combine.
    all_experts = torch.stack(
        [gated_silu_mlp(x, weights.w13[e], weights.w2[e]) for e in range(problem.num_experts)], dim=1
    )
    gates = torch.zeros(x.shape[0], problem.num_experts).scatter_(1, topk_ids, topk_weights)
    routed = torch.einsum("te,teh->th", gates, all_experts)
    shared = (
        gated_silu_mlp(x, weights.shared_w13, weights.shared_w2) if problem.shared_experts else torch.zeros_like(routed)
    )
    return ReferenceOutput(routed=routed, shared=shared)


def shared_tp_partial(
    problem: MoEProblem, weights: MoEWeights, tokens: DpRankTokens, tp_rank: int, tp_size: int
) -> torch.Tensor:
    """One TP rank's shared-expert output before any all-reduce (the TP partials sum to `shared`)."""
    if not problem.shared_experts:
        return torch.zeros(tokens.hidden_states.shape[0], problem.hidden)
    w13, w2 = shared_expert_tp_shard(weights, tp_rank, tp_size)
    return gated_silu_mlp(tokens.hidden_states.float(), w13, w2)
