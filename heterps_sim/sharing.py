"""Speed-aware work sharing among a stage's unequal replicas (H-PS's "status-aware" split),
shared by the engine (heterps_exec/sharing.py measures the speeds) and the simulator.

With `--share speed`, every step each trainer reports its seconds per microbatch of the step
just done; one all-reduce over the trainers gives everyone the same vector, smoothed by an
exponential moving average. Stage g then hands its replicas the step's m microbatches in
proportion to their speeds (1 / seconds), by largest remainder, a replica never taking more
than `CAP` times its equal share (activation memory), interleaved by smooth weighted
round-robin so each replica's microbatches spread over the step. Every rank computes the same
assignment from the same numbers, so senders and receivers agree without more messages.

The update is unchanged: each microbatch's loss is its per-sample sum over the GLOBAL batch
size, so the all-reduced gradient is the whole batch's whatever replica ran which microbatch
(the engine test checks the weights against single-process training).
A replica's order is the stage's single-lane order (`pipeline.stage_actions` over all m
microbatches) restricted to its own microbatches. No torch.
"""

from __future__ import annotations

import math

from heterps_sim.lanes import STEP, B, F
from heterps_sim.pipeline import stage_actions

CAP = 2.0
"""A replica takes at most this many times its equal share of a step's microbatches."""


def counts(speeds: list[float], m: int, cap: float = CAP) -> list[int]:
    """Microbatches per replica, proportional to speed, summing to m, capped."""
    k = len(speeds)
    limit = max(1, math.ceil(cap * m / k))
    total = sum(speeds)
    ideal = [m * s / total for s in speeds]
    out = [min(limit, math.floor(x)) for x in ideal]
    order = sorted(range(k), key=lambda r: (-(ideal[r] - math.floor(ideal[r])), r))
    while sum(out) < m:  # largest remainders first, then anyone under the cap
        for r in order + sorted(range(k), key=lambda r: (out[r], r)):
            if sum(out) < m and out[r] < limit:
                out[r] += 1
        if all(c >= limit for c in out):
            raise ValueError(f"{m} microbatches do not fit {k} replicas capped at {limit}")
    return out


def assignment(per_replica: list[int]) -> list[int]:
    """Replica of each microbatch 0..m-1: smooth weighted round-robin over the counts."""
    m = sum(per_replica)
    current = [0.0] * len(per_replica)
    out = []
    for _ in range(m):
        for r, c in enumerate(per_replica):
            current[r] += c
        r = max(range(len(per_replica)), key=lambda i: (current[i], -i))
        current[r] -= m
        out.append(r)
    return out


def step_actions(schedule: str, stage: int, num_stages: int, replica: int,
                 assign: list[int], step: int) -> list[tuple[int, int]]:
    """This replica's (code, mu) for one step (mu global: step * m + i), then (STEP, step)."""
    m = len(assign)
    own = [(F if a == "F" else B, step * m + i)
           for a, i in stage_actions(schedule, stage, num_stages, m) if assign[i] == replica]
    return own + [(STEP, step)]
