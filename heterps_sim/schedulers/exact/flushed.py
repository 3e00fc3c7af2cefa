"""The cheapest plan under the flushed step time (cost/flush.py), exactly, for a fixed
microbatch count m: a label-setting dynamic program over the pipeline from its last stage to
its first (flushed_reference.py in Python, flushed_kernel.py compiled; certified.py searches
every m and certifies the answer).

The stage model's DP (sweep.py) prices each stage on its own. A flushed step also pays sums
over the stages (fill, drain, boundary messages) and maxima over them (the busiest unit, the
latest step-end phase), so no per-stage price ranks partial plans. Instead every partial plan,
a suffix of stages g..S-1, keeps the few numbers that decide how any prefix can complete it.
With a_h = (1 - beta) w_h + d_fwd_h (its forward fill), c_h = beta w_h + d_bwd_h (backward
drain), pf_h / pb_h its forward / backward pace terms (busiest unit's extra microbatches, its
network interface's queue under contention), r_h = AR_h + u_h its step-end phase, and
C_h = sum_{x>=h} c_x, PB_h = max_{x>=h} pb_x, cost/flush.py's step time is

    T = sum_h (a_h + c_h) + max(max_h pf_h, PS pulls) + max_h (C_h + PB_h + r_h) - ...
      = D + max(PF, pulls) + PB_g + Z           with  Z = max_h (C_h + PB_h + r_h) - C_g - PB_g

and prepending a stage changes each number by one add or max:

    D' = D + a + c,  PF' = max(PF, pf),  PB' = max(PB, pb),  Z' = max(Z - c - (PB' - PB), r)

The PS pulls pace the forwards once any stage holds embedding rows (no pull crosses a step
end): by the step's pulls Q, less one microbatch's when the default model's odt holds the
PS's unloaded time, the same for every plan at one m, so a suffix keeps only whether it holds
rows. A stage with rows also carries its units' pull stagger in pf_h and its pushes' drain in
r_h (cost/flush.py).

(T' >= T + a: a suffix's own D + max(PF, pulls) + PB + Z bounds every completion from below.)
With Y = PB + Z, T = D + max(PF, pulls) + Y and Y' = max(Y - c, PB' + r): the final T is D
plus numbers that move at most one for one with the suffix's PF, pulls, Y, PB (and pending
terms, below). So a suffix is at least as good as another for every completion when its USD
per hour, slowest startup, units of each capped type, first stage's n and -net of its first
type are <= and its D plus its excess pace plus its largest excess of Y, PB and the pending
terms is <= the other's D (flushed_reference.dominates): the other is dropped. A suffix is
also dropped when the cheapest completion of it misses the limit or costs the ceiling.
Nothing the optimum needs is dropped: the search is exact.

Terms that need the stage before the suffix: a stage's interface queue (contention) counts
both of its boundaries (gpipe: the busier; 1F1B: each interface carries one direction's
activations and the other's gradients), so the suffix's first stage keeps its microbatches
per unit n, step-end phase r, microbatch work w and own boundary's seconds until the stage
before it is known (then PB, Z and PF take that boundary in).

A stage's units only matter through n = ceil(m / k), its price and its all-reduce; the last
two grow with k, so for each n only the fewest units can be optimal: k in
{max(k_lo, ceil(m / n))}, within [k_lo, min(k_hi, available)] (at most ~2 sqrt(m) counts).

Every plan's price includes the fixed USD/h every plan pays (cost.reference.
fixed_price_per_hour: the parameter-server hosts), as cost.reference.job_cost adds it.
"""

from __future__ import annotations

import math

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.cost.flush import BACKWARD_FRACTION, FORWARD_BOUNDARY_SHARE
from heterps_sim.schedulers.exact.flushed_common import (  # noqa: F401  (re-exported)
    EFFECTS,
    FlushedOptimum,
    LabelLimit,
)
from heterps_sim.schedulers.exact.flushed_reference import Search, unit_candidates  # noqa: F401

WORK_PER_LABEL = 100
"""solve(): the compiled search also stops past max_labels x this many units of work (stage
options tried and dominance tests): under a near cost ceiling most options are pruned before
they become labels, and trying them is then where the time goes."""


def solve(problem: Problem, m: int, schedule: str = "gpipe", *,
          effects: tuple[str, ...] = EFFECTS, incumbent: float = math.inf,
          max_labels: int = 2_000_000, types: tuple[int, ...] | None = None,
          ends: frozenset[int] | None = None, stage_types: dict[int, int] | None = None,
          fixed_cuts: bool = False, beta: float = BACKWARD_FRACTION,
          forward_share: float = FORWARD_BOUNDARY_SHARE,
          compiled: bool = True) -> FlushedOptimum | None:
    """The plan of least cost whose flushed throughput (cost/flush.flushed_throughput with
    `effects`, m microbatches, `schedule`) meets the limit; None when no plan does (or none
    costs less than `incumbent`). Raises LabelLimit past max_labels (the compiled search also
    past max_labels x WORK_PER_LABEL units of work). `types` (type indices), `ends` (layers a
    stage may end at; the last always) and `stage_types` ({first layer of a stage: the one type
    it may use}) restrict the plans searched: the answer is then the cheapest among those.
    `fixed_cuts`: every stage ends at the first of `ends` at or after its first layer (with
    `stage_types`, the units of one given plan: flushed_provision.py). `compiled`: the numba
    sweep (flushed_compiled.py: the same optimum, with more bounds) instead of the Python one
    (flushed_reference.py, the reference)."""
    search = Search(problem, m, tuple(effects), beta, forward_share, types, ends, stage_types,
                    fixed_cuts, schedule)
    if search.cap < problem.throughput_limit * (1 - 1e-12):
        return None
    if compiled:
        from heterps_sim.schedulers.exact.flushed_compiled import CompiledSearch
        got = CompiledSearch(problem, effects=tuple(effects), types=types, ends=ends,
                             stage_types=stage_types, fixed_cuts=fixed_cuts, schedule=schedule,
                             beta=beta, forward_share=forward_share).run(
            m, incumbent, max_labels=max_labels, max_work=max_labels * WORK_PER_LABEL)
        if got.status == "budget":
            raise LabelLimit(f"more than {max_labels} labels or {max_labels * WORK_PER_LABEL} "
                             "units of work")
        return got.best
    found = search.run(incumbent, max_labels)
    if found is None:
        return None
    cost, lab = found
    T = search.step_time(lab)
    return FlushedOptimum(search.plan(lab, schedule), cost, min(search.B / T, search.cap),
                          T, search.labels_made)


RAISE = 1.25
"""optimum(): each round's cost ceiling over the last one's."""
MAX_ROUNDS = 12
"""optimum(): rounds under a raised ceiling before the last (ceiling: the one-stage plan, or
none at all), ~14x the first ceiling."""


def optimum(problem: Problem, m: int, schedule: str = "gpipe", *,
            effects: tuple[str, ...] = EFFECTS, max_labels: int = 2_000_000,
            types: tuple[int, ...] | None = None, ends: frozenset[int] | None = None,
            lower_bound: float | None = None,
            top: float = math.inf) -> FlushedOptimum | None:
    """solve(), exact, in rounds under a rising cost ceiling X: a search told to keep only
    plans cheaper than X drops every partial plan that cannot be, so it is fast when X is
    close to the optimum, and whatever X is, a round that finds a plan has found the optimum
    (every cheaper plan was searched). X starts at `lower_bound` (default: the stage model's
    exact optimum, a plan's flushed step time being never below its slowest stage's time)
    and grows by RAISE until a round finds a plan or X passes the cheapest one-stage plan,
    which then is the last round's ceiling. `top`: a known plan's cost (at any m); then only
    plans cheaper than it are sought, and None means there is none at this m. `labels` counts
    every round."""
    kw = dict(effects=effects, max_labels=max_labels, types=types, ends=ends)
    try:  # every layer on one stage: the last ceiling
        one = solve(problem, m, schedule, effects=effects, types=types, ends=frozenset())
    except LabelLimit:
        one = None
    made = one.labels if one else 0
    ceiling = lower_bound if lower_bound is not None else _stage_model_bound(problem)
    if one is not None and one.cost_usd >= top:
        one = None
    top = min(one.cost_usd * (1 + 1e-9) if one else math.inf, top)
    for round_ in range(MAX_ROUNDS + 1):
        if not math.isfinite(ceiling) or ceiling <= 0.0 or ceiling >= top \
                or round_ == MAX_ROUNDS:
            ceiling = top
        got = solve(problem, m, schedule, incumbent=ceiling, **kw)
        made += got.labels if got else 0
        if got is not None:
            return FlushedOptimum(got.plan, got.cost_usd, got.throughput, got.step_time_s, made)
        if ceiling == top:
            if one is None:
                return None
            return FlushedOptimum(one.plan, one.cost_usd, one.throughput, one.step_time_s,
                                  made)
        ceiling *= RAISE


def _stage_model_bound(problem: Problem) -> float:
    """The stage model's exact optimum cost (over every plan, same-type cuts included, and
    every unit count), or 0."""
    return stage_model_optimum(problem)[0]


def stage_model_optimum(problem: Problem) -> tuple[float, Plan | None]:
    """(bound, plan): the stage model's exact optimum over every plan (same-type cuts
    included) and every unit count, and its cost a hair below, a lower bound on every plan's
    flushed cost (a flushed step is never shorter than its slowest stage's); (0, None) when
    the stage model has no plan."""
    from heterps_sim.cost.reference import evaluate_plan
    from heterps_sim.schedulers.base import NoFeasiblePlan
    from heterps_sim.schedulers.exact.sweep import ExactScheduler

    try:
        plan = ExactScheduler(ExactScheduler.Config(allow_same_type_cuts=True))._sweep(
            problem, "exact")
    except NoFeasiblePlan:
        return 0.0, None
    result = evaluate_plan(problem, plan, "exact")
    if not result.feasible:
        return 0.0, None
    return float(result.cost_usd) * (1 - 1e-9), plan
