"""Speed-aware sharing in the engine: the moving average of measured speeds.

The split itself (counts, interleaving, per-replica orders) is heterps_sim.core.sharing, which the
simulator uses too; here every trainer's seconds per microbatch are smoothed identically on
every rank, so all of them derive the same assignment (`StageSharing`, used by runtime/worker.py).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from heterps_sim.core.sharing import assignment, counts, step_actions

__all__ = ["EMA", "SpeedTracker", "StageSharing", "assignment", "counts", "step_actions"]

EMA = 0.5
"""Weight of the newest measurement in the moving average of seconds per microbatch."""


class SpeedTracker:
    """Moving average of every trainer's seconds per microbatch (same on every rank)."""

    def __init__(self, num_ranks: int) -> None:
        self.seconds: list[float | None] = [None] * num_ranks

    def update(self, measured: list[float]) -> None:
        """`measured[rank]`: seconds per microbatch in the last step (<= 0: no microbatch)."""
        for r, x in enumerate(measured):
            if x > 0:
                old = self.seconds[r]
                self.seconds[r] = x if old is None else EMA * x + (1 - EMA) * old

    def speeds(self, ranks: list[int]) -> list[float]:
        """1 / seconds for these ranks; equal speeds until all of them were measured."""
        secs = [self.seconds[r] for r in ranks]
        if any(s is None or s <= 0 for s in secs):
            return [1.0] * len(ranks)
        return [1.0 / s for s in secs]


class StageSharing:
    """--share speed: this step's microbatch assignment of every stage, from measured speeds."""

    def __init__(self, layout, num_microbatches: int, group) -> None:
        self.layout, self.group = layout, group
        self.m = num_microbatches
        self.tracker = SpeedTracker(layout.world_size)
        self.history: list[list[list[int]]] = []

    def assignments(self) -> list[list[int]]:
        per_stage = [counts(self.tracker.speeds(self.layout.ranks(g)), self.m)
                     for g in range(self.layout.num_stages)]
        self.history.append(per_stage)
        return [assignment(c) for c in per_stage]

    def exchange(self, rank: int, seconds_per_microbatch: float) -> None:
        """One all-reduce over the trainers: everyone learns everyone's speed."""
        t = torch.zeros(self.layout.world_size, dtype=torch.float64)
        t[rank] = seconds_per_microbatch
        dist.all_reduce(t, group=self.group)
        self.tracker.update(t.tolist())
