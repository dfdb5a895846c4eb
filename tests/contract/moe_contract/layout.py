"""Parallel layout of the simulated deployment (vLLM's TP x DP with expert parallelism)."""

from dataclasses import dataclass


class HarnessInputError(ValueError):
    """The harness was asked for something it cannot run; raised before any process starts."""


@dataclass(frozen=True)
class ParallelLayout:
    world_size: int
    tp_size: int

    def __post_init__(self) -> None:
        if self.world_size < 1 or self.tp_size < 1:
            raise HarnessInputError(f"world_size and tp_size must be positive, got {self.world_size}, {self.tp_size}")
        if self.world_size % self.tp_size != 0:
            raise HarnessInputError(f"world_size {self.world_size} is not divisible by tp_size {self.tp_size}")

    @property
    def dp_size(self) -> int:
        return self.world_size // self.tp_size

    @property
    def ep_size(self) -> int:
        # With --enable-expert-parallel vLLM spreads the experts over TP x DP.
        return self.world_size

    def dp_rank(self, rank: int) -> int:
        return rank // self.tp_size

    def tp_rank(self, rank: int) -> int:
        return rank % self.tp_size

    def tp_groups(self) -> list[list[int]]:
        # vLLM lays ranks out as DP x PP x TP, so a TP group is a run of consecutive ranks.
        return [list(range(d * self.tp_size, (d + 1) * self.tp_size)) for d in range(self.dp_size)]

    def dp_groups(self) -> list[list[int]]:
        return [[t + d * self.tp_size for d in range(self.dp_size)] for t in range(self.tp_size)]

    @property
    def name(self) -> str:
        return f"tp{self.tp_size}xdp{self.dp_size}-ep{self.ep_size}"
