"""A mixed stage (units of several types, plan.Stage.replicas) in the flushed closed form.

The stage model (cost/terms.py, MixedTerms) splits a mixed stage's batch so that every unit
finishes together: a fractional split by speed. A flushed step does not run that: it routes
whole microbatches, as the engine does (core/lanes.py, core/sharing.py), and the simulator
with it:

    share="equal"  (the engine's default) microbatch mu = n m + i of step n runs on replica
                   mu mod k: every replica gets floor or ceil of m / k microbatches whatever
                   its speed, and which replicas get the ceil changes from step to step (the
                   pattern repeats every k / gcd(m, k) steps)
    share="speed"  (--share speed) from the second step on, sharing.counts splits the m
                   microbatches in proportion to the finish-together shares (capped at
                   sharing.CAP x the equal share), the same every step

So per step n, replica r of type j holds n_r(n) microbatches of w_j = alpha_j P_j / m seconds
each and a step-end phase u_j = (1 - alpha_j) P_j + S_j + F_j. In cost/flush.py's step time a
mixed stage enters per step as

    w_g     = w of the replica that runs the step's first microbatch (it crosses the pipeline)
    busy_g  = max_r n_r(n) w_r           its busiest unit (the slow type paces it under equal)
    u_g     = max_r u_r                  after the all-reduce barrier every unit runs its own
    AR_g    = the ring of all k units over the slowest member's network

and the throughput is B over the mean step time over the routing's period (the simulator
measures whole periods). One type reduces to cost/flush.py's single-type terms: every unit
has the same w, and the busiest holds ceil(m / k) microbatches in every step.

A worked case (tests/sim/cost/test_flush_mixed.py): one stage, a unit of speed 1 (1 s per
microbatch) and one of speed 2 (0.5 s), m = 3. Equal: step 0 gives microbatches 0, 2 to the
slow unit (2 s) and 1 to the fast one; step 1 gives 4 to the slow unit (1 s) and 3, 5 to the
fast one (1 s): 1.5 s per step on average. The finish-together split says 1 s (one
microbatch to the slow unit, two to the fast one): what share="speed" runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from heterps_sim.core import sharing
from heterps_sim.cost import dominant
from heterps_sim.cost.terms import MixedTerms

SHARES = ("equal", "speed")
"""How a stage's replicas split a step's microbatches (core/hps.py's `share`)."""
MAX_PERIOD_STEPS = 4096
"""Steps of routing averaged over at most (the period, lcm over mixed stages of
k / gcd(m, k), is far shorter for any plan with a few mixed stages of moderate k)."""


@dataclass(frozen=True, slots=True)
class MixedStage:
    work_s: tuple[float, ...]
    """Per replica (groups in order, as Stage.replica_types): one microbatch's work w_j."""
    step_end_s: tuple[float, ...]
    """Per replica: the step-end phase u_j."""
    allreduce_s: float
    """The ring of all the stage's units over the slowest member's network (0 when off)."""
    weights: tuple[float, ...]
    """Per replica: its finish-together share of the batch (share="speed")."""


def mixed_stage(t: MixedTerms, m: int, allreduce: bool) -> MixedStage:
    """The per-replica terms of a mixed stage at m microbatches per step."""
    work, end = [], []
    for part, n in zip(t.parts, t.counts):
        work += [part.alpha * part.parallel_s / m] * n
        end += [(1.0 - part.alpha) * part.parallel_s + part.serial_s + part.fixed_s] * n
    k = sum(t.counts)
    first = t.parts[0]
    ar = (dominant.allreduce_time(max(p.bw_s for p in t.parts), first.lat_s, k)
          if allreduce and first.default else 0.0)
    _, shares = t.split()
    weights = [s for s, n in zip(shares, t.counts) for _ in range(n)]
    return MixedStage(tuple(work), tuple(end), ar, tuple(weights))


def assignments(stage: MixedStage, m: int, share: str) -> list[list[int]]:
    """The replica of each microbatch 0..m-1, for every step of the routing's period."""
    if share not in SHARES:
        raise ValueError(f"share must be one of {SHARES}, got {share!r}")
    k = len(stage.work_s)
    if share == "speed":
        return [sharing.assignment(sharing.counts(list(stage.weights), m))]
    return [[(n * m + i) % k for i in range(m)] for n in range(k // math.gcd(m, k))]


def period_steps(routes: list[list[list[int]]]) -> int:
    """Steps after which every mixed stage's routing repeats (at most MAX_PERIOD_STEPS)."""
    return min(math.lcm(*(len(r) for r in routes)), MAX_PERIOD_STEPS) if routes else 1


def step_terms(stage: MixedStage, assign: list[int]) -> tuple[float, float]:
    """(w_g, busy_g) of the mixed stage in one step routed by `assign`."""
    counts = [0] * len(stage.work_s)
    for r in assign:
        counts[r] += 1
    busy = max(c * w for c, w in zip(counts, stage.work_s))
    return stage.work_s[assign[0]], busy


def most_microbatches(routes: list[list[int]], k: int) -> int:
    """The most microbatches one replica holds in any step of the routing."""
    best = 0
    for assign in routes:
        counts = [0] * k
        for r in assign:
            counts[r] += 1
        best = max(best, max(counts))
    return best
