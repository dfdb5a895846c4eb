"""The MoE layer's data path on CPU: route, dispatch, experts, combine with FlashInfer semantics.

This stands where vLLM's `moe_forward` custom op runs the modular kernel on a GPU. The
experts see payload-dtype inputs and weights, accumulate in float32 and round their
output to the payload dtype, as the bf16 GEMMs do. Combine:
- two-sided: the installed FlashInfer `mnnvl_moe_alltoallv_combine`, with the NVLink
  transport and the CUDA allocation replaced by doubles (see flashinfer_two_sided);
- one-sided: the same transport into (token, k) slots, then the CUDA kernel's pairwise
  top-k sum in the payload dtype (see one_sided_kernel_order).
"""

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .layout import ParallelLayout
from .one_sided_kernel_order import one_sided_topk_sum
from .paths import ONE_SIDED, TWO_SIDED
from .problem import MoEProblem, MoEWeights, route_top_k, shared_expert_tp_shard
from .transport import exchange_counts, exchange_rows


def payload_precision_mlp(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Gated SiLU MLP with payload-dtype operands and float32 accumulation; float32 result."""
    gate, up = (x.to(dtype).float() @ w13.to(dtype).float().T).chunk(2, dim=-1)
    activation = (F.silu(gate) * up).to(dtype).float()
    return activation @ w2.to(dtype).float().T


class SharedExpertTpShard(torch.nn.Module):
    """This TP rank's slice of the shared expert; its output is a partial sum over TP."""

    def __init__(self, weights: MoEWeights, tp_rank: int, tp_size: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.w13, self.w2 = shared_expert_tp_shard(weights, tp_rank, tp_size)
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return payload_precision_mlp(x, self.w13, self.w2, self.dtype).to(self.dtype)


@dataclass
class CpuAll2AllMoELayer:
    problem: MoEProblem
    layout: ParallelLayout
    rank: int
    weights: MoEWeights
    combine: str  # paths.TWO_SIDED or paths.ONE_SIDED: the FlashInfer combine the class runs
    ep_group: dist.ProcessGroup | None
    two_sided_combine: Callable[..., torch.Tensor]
    shared_expert: SharedExpertTpShard | None

    def __call__(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
        shared_experts_input: torch.Tensor | None,
        *entry_args: object,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        # entry_args: what else a release passes its custom op (layer_name; later also
        # input_ids, hidden_dim_unpadded). None of it changes the data path here.
        fused = self.routed_output(hidden_states, router_logits)
        if shared_experts_input is None:
            return fused
        if self.shared_expert is None:
            raise RuntimeError("runner passed shared-expert input but the layer has no shared expert")
        return self.shared_expert(shared_experts_input), fused

    def _local_experts(self, x: torch.Tensor, expert_ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.shape[0], self.problem.hidden, dtype=self.problem.dtype)
        per_rank = self.problem.num_experts // self.layout.ep_size
        for expert in range(self.rank * per_rank, (self.rank + 1) * per_rank):
            rows = expert_ids == expert
            if rows.any():
                y = payload_precision_mlp(
                    x[rows], self.weights.w13[expert], self.weights.w2[expert], self.problem.dtype
                )
                # The router weight is applied in the experts' finalize, before combine.
                out[rows] = (y * weights[rows, None]).to(self.problem.dtype)
        return out

    def routed_output(self, hidden_states: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        top_k, ep_size = self.problem.top_k, self.layout.ep_size
        tokens = hidden_states.shape[0]
        topk_weights, topk_ids = route_top_k(router_logits, top_k)
        destination = (topk_ids // (self.problem.num_experts // ep_size)).flatten()
        slot_order = torch.argsort(destination, stable=True)  # (token * top_k + k), grouped by rank
        send_counts = torch.bincount(destination, minlength=ep_size).tolist()
        recv_counts = exchange_counts(send_counts, self.ep_group)

        def dispatch(rows: torch.Tensor) -> torch.Tensor:
            return exchange_rows(rows, send_counts, recv_counts, self.ep_group)

        received_x = dispatch(hidden_states.to(self.problem.dtype)[slot_order // top_k])
        received_ids = dispatch(topk_ids.flatten()[slot_order])
        received_weights = dispatch(topk_weights.flatten()[slot_order])
        expert_out = self._local_experts(received_x, received_ids, received_weights)

        combine_info = SimpleNamespace(
            recv_rank_count_cumsum=torch.tensor(recv_counts).cumsum(0),
            recv_rank_local_indices=torch.arange(expert_out.shape[0]),
            send_rank_count_cumsum=torch.tensor(send_counts).cumsum(0),
            backward_recv_rank_local_indices=slot_order,
        )
        if self.combine == TWO_SIDED:
            return self.two_sided_combine(expert_out, combine_info, None, self.rank, ep_size, top_k, tokens)
        if self.combine == ONE_SIDED:
            slots = torch.zeros(tokens * top_k, self.problem.hidden, dtype=self.problem.dtype)
            slots[slot_order] = exchange_rows(expert_out, recv_counts, send_counts, self.ep_group)
            return one_sided_topk_sum(slots.view(tokens, top_k, self.problem.hidden))
        raise ValueError(f"unknown combine {self.combine}")
