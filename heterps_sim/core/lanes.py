"""Routing and order (shared by the simulator and the engine): which replica runs which
microbatch, and in what order (one list each). No simpy, no torch.

Microbatches are numbered globally, mu = step * m + i (i = 0..m-1). At stage g with k_g
replicas, microbatch mu runs on replica mu mod k_g (over the steps of a continuous pipeline this
spreads any remainder of m / k_g evenly). The order comes from `pipeline.stage_actions`, applied
to *rounds* of L = max_g k_g consecutive microbatches (one per lane: lane l is the pipeline copy
that uses replica l mod k_g of every stage). A replica expands each (action, round) into its own
microbatches of that round, in increasing order, so a replica serving several lanes runs them
in turn. With one replica per stage, rounds are microbatches and the order is exactly
stage_actions'. Rounds keep 1f1b's warm-up (s - g - 1 rounds) wide enough to feed every replica
downstream: a warm-up of s - g - 1 *microbatches* would starve a stage with more replicas.

Two stream shapes:

    flush       (gpipe / 1f1b with the `bubbles` effect): each step is stage_actions(schedule,
                g, s, ceil(m / L)) over that step's rounds, then the step-end phase; the next
                step starts from an empty pipeline (fill and drain every step).
    continuous  (`async`, or any schedule with `bubbles` off): one stage_actions("async", g, s,
                ceil(m N / L)) over all steps' rounds, no flush; a replica's step-end phase for
                step n comes right after its last backward of step n.

    stage 0 of 2, one replica, m = 2, flush 1f1b:  F0 F1 B0 B1 | F2 F3 B2 B3 |
                                      continuous:  F0 F1 B0 F2 B1 | F3 B2 F4 B3 | ...
"""

from __future__ import annotations

import math

from heterps_sim.core.pipeline import stage_actions

F, B, STEP = 0, 1, 2
"""Action codes: forward, backward, step-end phase (all-reduce + non-splitting work)."""
MAX_EVEN_MICROBATCHES = 512
"""The default m is a multiple of every stage's replica count when their lcm is at most this."""


def default_microbatches(replicas: list[int], num_stages: int, batch_size: int) -> int:
    """m when neither the options nor the plan (num_microbatches > 1) set it.

    The lcm of the replica counts (so every replica gets the same share of every step) when it
    is at most 512, else the smallest multiple of the largest count >= 512 (others then differ
    by at most one microbatch per step); then doubled while below 4 x stages (keeps gpipe/1f1b
    bubbles under ~20%) and no microbatch would fall below one sample.
    """
    lcm = math.lcm(*replicas)
    kmax = max(replicas)
    m = lcm if lcm <= MAX_EVEN_MICROBATCHES else kmax * math.ceil(MAX_EVEN_MICROBATCHES / kmax)
    while m < 4 * num_stages and 2 * m <= batch_size:
        m *= 2
    return m


def num_lanes(replicas: list[int], flush: bool) -> int:
    """L, the microbatches per round.

    max_g k_g feeds every replica of the widest stage once per round. When some k_g does not
    divide it, a round gives that stage's replicas floor or ceil of L / k_g microbatches, and in
    a continuous pipeline the uneven rounds line up along the schedule's circuits (measured:
    -4% on dlrm-64types with k = 5, 11, 14, 26); continuous streams then use rounds of 2 max_g
    k_g, which absorbs it (< 0.01% there). Flush schedules keep max_g k_g (with one replica per
    stage, rounds are microbatches: exactly stage_actions' order).
    """
    kmax = max(replicas)
    if flush or all(kmax % k == 0 for k in replicas):
        return kmax
    return 2 * kmax


def cooldown_steps(num_stages: int, lanes: int, m: int, flush: bool) -> int:
    """Unmeasured steps simulated after the last one in a continuous pipeline: without them the
    last measured steps would finish early, as the stream drains with nothing behind them."""
    return 0 if flush else math.ceil(num_stages * lanes / m)


def _expand(base, offset: int, end: int, lanes: int, k: int, r: int) -> list[tuple[int, int]]:
    """Replica r's microbatches of each (code, round) in `base`, in order."""
    if k == lanes:  # one microbatch per replica per round (the common case)
        first = offset + (r - offset) % k
        return [(code, mu) for code, rho in base for mu in (first + rho * lanes,) if mu < end]
    return [(code, mu) for code, rho in base for lo in (offset + rho * lanes,)
            for mu in range(lo + (r - lo) % k, min(lo + lanes, end), k)]


def stage_orders(schedule: str, flush: bool, stage: int, num_stages: int, m: int,
                 num_steps: int, lanes: int) -> list[tuple[int, int]]:
    """The stage_actions list over rounds, as (code, round), that every replica of `stage`
    expands."""
    if flush:
        actions = stage_actions(schedule, stage, num_stages, math.ceil(m / lanes))
    else:
        actions = stage_actions("async", stage, num_stages, math.ceil(m * num_steps / lanes))
    return [(F if a == "F" else B, rho) for a, rho in actions]


def replica_actions(base, flush: bool, k: int, r: int, m: int, num_steps: int,
                    lanes: int, *, first_step: int = 0) -> list[tuple[int, int]]:
    """Replica r's (code, mu) list, with (STEP, n) after its part of step n.

    `first_step` (continuous streams): the stream starts empty at that step (a run resumed
    from a checkpoint, or the engine's async segment between checkpoints); microbatches and
    steps keep their global numbers, so routing (mu mod k) is the same as in one stream."""
    out: list[tuple[int, int]] = []
    if flush:
        for n in range(num_steps):
            out += _expand(base, n * m, (n + 1) * m, lanes, k, r)
            out.append((STEP, n))
        return out
    shift = first_step * m
    actions = [(code, mu + shift) for code, mu in
               _expand(base, 0, m * num_steps, lanes, k, (r - shift) % k)]
    last_mu = []
    for n in range(first_step, first_step + num_steps):
        hi = (n + 1) * m - 1
        last = hi - (hi - r) % k
        last_mu.append(last if last >= n * m else -1)
    closed, pos = 0, 0

    def close_through(step: int) -> None:
        nonlocal closed
        while closed < num_steps and (closed <= step or last_mu[closed] < 0):
            out.append((STEP, first_step + closed))
            closed += 1

    close_through(-1)  # steps in which this replica has no microbatch at all
    for n in range(num_steps):
        if last_mu[n] >= 0:
            at = actions.index((B, last_mu[n]), pos) + 1  # backwards run in microbatch order
            out += actions[pos:at]
            pos = at
            close_through(n)
    out += actions[pos:]
    close_through(num_steps - 1)
    return out
