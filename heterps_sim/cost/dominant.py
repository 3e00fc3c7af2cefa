"""The default model's stage time and provisioning, written once (docs/design.md, "The default
model"). Plain arithmetic on floats, so the reference evaluator calls these functions as they
are and the numba kernels compile the same source (cost/dominant_numba.py): the operation
order is fixed here, so every caller rounds alike.

A stage on type j with k units, P, S, alpha its Amdahl terms (cost/amdahl.py), F its per-unit
fixed seconds per step, R = 2 x dense parameter bytes / net_j and Q = 2 x latency_s:

    ET(k) = P ((1 - alpha) + alpha / k) + S + F + AR(k)                          step_time
    AR(k) = (k - 1) / k * R + (k - 1) * Q       (ring all-reduce; 0 for k = 1)   allreduce_time

For k >= 2, ET(k) = C + A / k + Q k with C = (1 - alpha) P + S + F + R - Q, A = alpha P - R:
convex in k (A >= 0) or increasing (A < 0), so {k >= 2 : ET(k) <= E} is an interval whose ends
are the roots of Q k^2 + (C - E) k + A = 0; the roots are only a first guess, every answer is
checked with step_time itself. Units lie in [k_lo, k_hi]: k_lo from memory, k_hi from the
type's availability, MAX_REPLICAS and the scenario's minimum batch per unit.
"""

from __future__ import annotations

import math

NONE = -1
"""No unit count in range meets the target."""
TARGET_TOLERANCE = 1e-12
"""A stage time within this relative hair of the target meets it, so that the level
B / ET(k) (rounded) is met by k units, as the paper's ceil tolerance does for its formula."""


def allreduce_time(bw_s, lat_s, units):
    """Seconds of one ring all-reduce among `units` replicas (0 for one unit)."""
    if units <= 1:
        return 0.0
    return (units - 1.0) / units * bw_s + (units - 1.0) * lat_s


def step_time(par, ser, alpha, fixed_s, bw_s, lat_s, units):
    """ET(k): seconds per step of one stage on `units` units."""
    return par * ((1.0 - alpha) + alpha / units) + ser + fixed_s + allreduce_time(bw_s, lat_s, units)


def _roots(par, ser, alpha, fixed_s, bw_s, lat_s, target):
    """(lo, hi): real k >= 2 with ET(k) <= target lie in [lo, hi] up to rounding; lo > hi: none."""
    c = (1.0 - alpha) * par + ser + fixed_s + bw_s - lat_s
    a = alpha * par - bw_s
    d = c - target
    if lat_s <= 0.0:  # d k + a <= 0
        if d < 0.0:
            return (a / -d if a > 0.0 else 2.0), math.inf
        if d == 0.0:
            return (2.0, math.inf) if a <= 0.0 else (math.inf, 0.0)
        return (2.0, -a / d) if a < 0.0 else (math.inf, 0.0)
    disc = d * d - 4.0 * lat_s * a
    if disc < 0.0:
        return math.inf, 0.0
    root = math.sqrt(disc)
    return (-d - root) / (2.0 * lat_s), (-d + root) / (2.0 * lat_s)


def least_units(par, ser, alpha, fixed_s, bw_s, lat_s, target, k_lo, k_hi):
    """The fewest units k in [k_lo, k_hi] with ET(k) <= target (1 + TARGET_TOLERANCE), or NONE."""
    if k_lo > k_hi:
        return NONE
    target = target * (1.0 + TARGET_TOLERANCE)
    if k_lo <= 1:
        if step_time(par, ser, alpha, fixed_s, bw_s, lat_s, 1) <= target:
            return 1
    start = max(2, k_lo)
    if start > k_hi:
        return NONE
    lo, hi = _roots(par, ser, alpha, fixed_s, bw_s, lat_s, target)
    if lo > hi + 2.0 or hi < start - 2.0 or lo > k_hi + 2.0:
        return NONE
    k = start if lo <= start else int(math.ceil(lo))
    if k > k_hi:
        k = k_hi
    # the roots are a guess: step down while the unit below also meets the target, then up
    for _ in range(3):
        if k > start and step_time(par, ser, alpha, fixed_s, bw_s, lat_s, k - 1) <= target:
            k -= 1
    for _ in range(4):
        if step_time(par, ser, alpha, fixed_s, bw_s, lat_s, k) <= target:
            return k
        k += 1
        if k > k_hi:
            return NONE
    return NONE


def fastest_units(par, ser, alpha, fixed_s, bw_s, lat_s, k_lo, k_hi):
    """The k in [k_lo, k_hi] of least ET(k) (fewest on ties), or NONE when the range is empty."""
    if k_lo > k_hi:
        return NONE
    best_k = k_lo
    best = step_time(par, ser, alpha, fixed_s, bw_s, lat_s, k_lo)
    a = alpha * par - bw_s
    if lat_s > 0.0:
        guess = math.sqrt(a / lat_s) if a > 0.0 else 2.0
    else:
        guess = float(k_hi) if a > 0.0 else 2.0
    g = int(min(max(math.floor(guess), 1.0), float(k_hi)))
    for k in (g - 1, g, g + 1, g + 2, k_hi):
        if k_lo <= k <= k_hi:
            et = step_time(par, ser, alpha, fixed_s, bw_s, lat_s, k)
            if et < best or (et == best and k < best_k):
                best, best_k = et, k
    return best_k


def most_units_within(par, ser, alpha, fixed_s, bw_s, lat_s, budget, k_lo, k_hi):
    """The most units k in [k_lo, k_hi] with k x ET(k) <= budget (k ET(k) grows with k), or
    NONE: a stage's own cost per batch divided by its price."""
    if k_lo > k_hi or k_lo * step_time(par, ser, alpha, fixed_s, bw_s, lat_s, k_lo) > budget:
        return NONE
    # k ET(k) = C k + A + Q k^2 for k >= 2 (C, A as in _roots)
    c = (1.0 - alpha) * par + ser + fixed_s + bw_s - lat_s
    a = alpha * par - bw_s
    if lat_s > 0.0:
        disc = c * c - 4.0 * lat_s * (a - budget)
        guess = (-c + math.sqrt(disc)) / (2.0 * lat_s) if disc >= 0.0 else float(k_lo)
    elif c > 0.0:
        guess = (budget - a) / c
    else:
        guess = float(k_hi)
    k = int(min(max(math.floor(guess), float(k_lo)), float(k_hi)))
    for _ in range(4):
        if k < k_hi and (k + 1) * step_time(par, ser, alpha, fixed_s, bw_s, lat_s, k + 1) <= budget:
            k += 1
    for _ in range(k_hi + 1):
        if k <= k_lo or k * step_time(par, ser, alpha, fixed_s, bw_s, lat_s, k) <= budget:
            return k
        k -= 1
    return k


def memory_units(state, act, batch, capacity):
    """The fewest units whose memory holds the stage: state + batch x act / k <= capacity
    (capacity = headroom x memory; inf: no limit). A huge number when the state alone fails."""
    if capacity == math.inf or act * batch <= 0.0:
        return 1 if state <= capacity else 1 << 40
    free = capacity - state
    if free <= 0.0:
        return 1 << 40
    guess = batch * act / free
    if guess > 1e12:
        return 1 << 40
    k = max(1, int(math.ceil(guess)))
    if k > 1 and state + batch * act / (k - 1) <= capacity:
        k -= 1
    while state + batch * act / k > capacity:
        k += 1
    return k


def billed_hours(seconds, granularity_s):
    """Hours billed for `seconds` of a unit's life: rounded up to whole granules."""
    if granularity_s <= 0.0:
        return seconds / 3600.0
    return math.ceil(seconds / granularity_s) * granularity_s / 3600.0


def stage_extras(step_oh_j, layer_oh_j, net_j, capacity_j, cum_param, cum_state, cum_act,
                 first, last, lat2_s, batch, k_cap):
    """(F, R, Q, k_lo, k_hi) of layers first..last on one type (docs/design.md): fixed seconds
    per step, all-reduce bandwidth and latency seconds, and the unit range. `cum_*` are the
    prefix sums of ModelArrays; k_cap = min(availability, MAX_REPLICAS, B // min_unit_batch)."""
    fixed_s = step_oh_j + (last - first + 1.0) * layer_oh_j
    bw_s = 2.0 * (cum_param[last + 1] - cum_param[first]) / net_j
    k_lo = memory_units(cum_state[last + 1] - cum_state[first],
                        cum_act[last + 1] - cum_act[first], batch, capacity_j)
    return fixed_s, bw_s, lat2_s, k_lo, k_cap
