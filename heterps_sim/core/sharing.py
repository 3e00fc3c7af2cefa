"""Speed-aware work sharing among a stage's unequal replicas (H-PS's "status-aware" split),
shared by the engine (heterps_exec/hps/speed.py measures the speeds) and the simulator.

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

from heterps_sim.core.lanes import STEP, B, F
from heterps_sim.core.pipeline import stage_actions

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


def finish_together(serial: list[float], parallel: list[float], units: list[int],
                    cap: float | None = CAP) -> tuple[float, list[float]]:
    """Step time T of a mixed stage and the batch share of ONE unit of each type.

    Type j has units[j] units; one unit of it takes serial[j] + parallel[j] * x seconds for a
    share x of the batch (c_j = (1 - alpha_j) P_j + S_j, a_j = alpha_j P_j in cost/reference.py). Every
    unit holds the stage's weights, so it runs its serial part every step whatever its share:
    T >= max_j c_j. Above that the shares x_j(T) = min(cap / K, (T - c_j) / a_j) (K units in all;
    `cap` times the equal share, as `counts` caps microbatches; None: no cap) make all units
    finish together, and T is the least time with sum_j n_j x_j(T) >= 1. Without a binding cap

        T = (1 + sum_j n_j c_j / a_j) / sum_j (n_j / a_j)

    and for one type T = c + a / k, the Amdahl ET(k). f(T) = sum_j n_j x_j(T) is piecewise
    linear with kinks where a type reaches its cap, so T is found exactly segment by segment.
    Shares are scaled to sum to 1 when the serial floor leaves slack (T = max c_j).
    """
    total_units = sum(units)
    xmax = math.inf if cap is None else cap / total_units

    def share(j: int, t: float) -> float:
        return xmax if parallel[j] <= 0 else min(xmax, max(0.0, (t - serial[j]) / parallel[j]))

    def filled(t: float) -> float:
        return sum(n * share(j, t) for j, n in enumerate(units))

    t = max(serial)
    kinks = sorted(c + a * xmax for c, a in zip(serial, parallel) if a > 0 and c + a * xmax > t)
    for kink in kinks + [math.inf]:
        got = filled(t)
        if got >= 1.0:
            break
        slope = sum(n / parallel[j] for j, n in enumerate(units)
                    if parallel[j] > 0 and serial[j] + parallel[j] * xmax > t)
        reach = t + (1.0 - got) / slope
        if reach <= kink:
            t = reach
            break
        t = kink
    got = filled(t)
    return t, [share(j, t) / got for j in range(len(units))]
