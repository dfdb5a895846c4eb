"""Row exchange between EP ranks over gloo: the CPU stand-in for NVLink all-to-all."""

import itertools

import torch
import torch.distributed as dist


def exchange_counts(send_counts: list[int], group: dist.ProcessGroup | None) -> list[int]:
    if group is None:
        return list(send_counts)
    send = torch.tensor(send_counts, dtype=torch.int64)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv.tolist()


def exchange_rows(
    rows: torch.Tensor,
    send_counts: list[int],
    recv_counts: list[int],
    group: dist.ProcessGroup | None,
) -> torch.Tensor:
    """Send rows[sum(send_counts[:r]) : ...] to rank r; return what every rank sent us, in rank order."""
    if group is None:
        if send_counts != recv_counts:
            raise ValueError(f"loopback needs equal send and receive counts: {send_counts} != {recv_counts}")
        return rows.clone()
    received = torch.empty((sum(recv_counts), *rows.shape[1:]), dtype=rows.dtype)
    dist.all_to_all_single(
        received,
        rows.contiguous(),
        output_split_sizes=recv_counts,
        input_split_sizes=send_counts,
        group=group,
    )
    return received


def counts_from_cumsum(cumsum: torch.Tensor) -> list[int]:
    values = [0, *cumsum.tolist()]
    return [b - a for a, b in itertools.pairwise(values)]
