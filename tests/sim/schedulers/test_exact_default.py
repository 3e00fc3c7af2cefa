"""The exact scheduler stays exact under the default cost model: brute force over every plan
of tiny random problems (cost.evaluate_plan on each), with and without availability caps.

Under the default model a stage's time is not monotone in its units (the all-reduce grows with
k), memory sets a floor on units, the minimum batch a ceiling, the PS caps the plan, and the
bill depends on the slowest-starting type in the plan; the sweep handles each (see
schedulers/exact/sweep.py) and must still find the brute-force optimum.
"""

import dataclasses
import math

import numpy as np
import pytest

from heterps_sim.cost import dominant
from heterps_sim.cost.reference import MAX_REPLICAS, evaluate_plan, ps_cap
from heterps_sim.cost.terms import model_arrays, stage_terms
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.testing import random_default_problem

from .test_exact import all_plans, same_cost

SHAPES = [(1, 3), (2, 2), (2, 4), (3, 2), (3, 3), (4, 2), (4, 3), (5, 2)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["least", "exact"])
def test_exact_matches_brute_force(seed, mode):
    rng = np.random.default_rng(1000 + seed)
    feasible = 0
    for n in range(8):
        layers, types = SHAPES[n]
        p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.4))
        want = min((evaluate_plan(p, plan, mode).cost_usd for plan, _ in all_plans(p, False)),
                   default=math.inf)
        scheduler = ExactScheduler()
        try:
            plan = scheduler.schedule(p, Evaluator(p, mode))
            got = evaluate_plan(p, plan, mode).cost_usd
        except NoFeasiblePlan:
            got = math.inf
        assert same_cost(got, want), (n, got, want, scheduler.notes)
        assert math.isinf(got) or scheduler.notes["predicted_cost_usd"] == pytest.approx(got, rel=1e-9)
        feasible += math.isfinite(want)
    assert feasible >= 2  # the family is not all infeasible


def test_a_limit_past_the_parameter_server_has_no_plan():
    rng = np.random.default_rng(5)
    p = random_default_problem(rng, 3, 2)
    p = p.with_limit(1e12)  # far past any PS capacity once a layer pulls embedding rows
    p = dataclasses.replace(p, sparse_bytes=np.array([4096.0, 0.0, 0.0]))
    with pytest.raises(NoFeasiblePlan, match="parameter server"):
        ExactScheduler().schedule(p, Evaluator(p, "least"))


def _startup_heavy(rng: np.random.Generator, layers: int, types: int):
    """A default-model problem where the startup and the billing granule decide the bill: a
    startup class per type (0 to 900 s, so up to `types` sweeps, each bounded by the ones
    before it), jobs from a few seconds to hours, granules of none, 1 s, 60 s or an hour."""
    p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.3))
    costs = dataclasses.replace(
        p.unit_costs, startup_s=rng.choice([0.0, 30.0, 120.0, 300.0, 900.0], size=types),
        billing_granularity_s=float(rng.choice([0.0, 1.0, 60.0, 3600.0])))
    return dataclasses.replace(p, costs=costs,
                               num_samples=float(rng.choice([1e3, 1e5, 1e7, 1e9])))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["least", "exact"])
def test_startup_and_billing_bounds_keep_the_optimum(seed, mode):
    """The sweep's bounds that count the startup and whole billing granules (a plan of f USD
    per hour costs at least f x billed(startup + N / Thr)), and each startup class bounded by
    the cheapest plan of the classes before it, never cut the brute-force optimum, with and
    without same-type cuts (under this model a cut can shed units a memory floor forced)."""
    rng = np.random.default_rng(2000 + seed)
    feasible = 0
    for n in range(10):
        layers, types = SHAPES[n % len(SHAPES)]
        p = _startup_heavy(rng, layers, types)
        costs = [(evaluate_plan(p, plan, mode).cost_usd, cut) for plan, cut in all_plans(p, True)]
        for cuts in (False, True):
            want = min((c for c, cut in costs if cuts or not cut), default=math.inf)
            scheduler = ExactScheduler(ExactScheduler.Config(allow_same_type_cuts=cuts))
            try:
                got = evaluate_plan(p, scheduler.schedule(p, Evaluator(p, mode)), mode).cost_usd
            except NoFeasiblePlan:
                got = math.inf
            assert same_cost(got, want), (n, cuts, got, want, scheduler.notes)
        feasible += math.isfinite(want)
    assert feasible >= 3


def floor_sweep_oracle(p, cuts: bool) -> float:
    """Least cost over all plans in `least` mode without caps, by a route independent of the
    sweep's bounds: every stage option's units at TL and throughput, then for each startup
    class s and floor mu among the options' throughputs, a plain DP for the least USD per
    hour over the plans whose options all reach mu and whose types start by s, priced at
    billed(s + N / min(mu, PS cap)) hours. Each value bounds some plan's cost from above and
    the optimum's own (s, mu) gives its cost, so the least value is the optimum. Of the floors
    billed the same hours only the lowest is needed (the DP never falls as mu grows)."""
    n_l, n_t, batch = p.num_layers, p.num_types, p.batch_size
    floor = p.throughput_limit * (1 - 1e-12)
    cap = ps_cap(p)
    if cap < floor:
        return math.inf
    arrays = model_arrays(p)
    runs = p.runnable & ~np.isnan(p.alpha)
    net = p.network_bytes_per_s
    options = {}  # (first, last, type, boundary bandwidth or None) -> (USD per hour, throughput)
    for a in range(n_l):
        for j in range(n_t):
            for b in range(a, n_l):
                if not runs[b, j]:
                    break
                for bw in [None] if b == n_l - 1 else sorted(set(min(net[j], x) for x in net)):
                    t = stage_terms(p, a, b, j, -1 if bw is None else 0, bandwidth=bw,
                                    arrays=arrays)
                    k = t.least_units(batch, p.throughput_limit)
                    if t.k_lo > t.k_hi or k is None or not t.k_lo <= k <= min(t.k_hi, MAX_REPLICAS):
                        continue
                    thr = batch / t.exec_time(k)
                    if thr >= floor:
                        options[(a, b, j, bw)] = (p.price_per_hour[j] * k, thr)
    starts = p.unit_costs.startup_s
    best = math.inf
    for s in sorted(set(float(x) for x in starts)):
        floors = {}  # billed hours -> the lowest floor billed them
        for mu in sorted(set(thr for _, thr in options.values()), reverse=True):
            floors[dominant.billed_hours(s + p.num_samples / min(mu, cap),
                                         p.unit_costs.billing_granularity_s)] = mu
        for hours, mu in floors.items():
            h = np.full((n_l + 1, n_t), math.inf)
            for a in range(n_l - 1, -1, -1):
                for j in range(n_t):
                    if starts[j] > s:
                        continue
                    for b in range(a, n_l):
                        for nxt in [-1] if b == n_l - 1 else range(n_t):
                            if nxt == j and not cuts:
                                continue
                            bw = None if nxt < 0 else min(net[j], net[nxt])
                            usd, thr = options.get((a, b, j, bw), (math.inf, 0.0))
                            if thr >= mu:
                                h[a, j] = min(h[a, j], usd + (0.0 if nxt < 0 else h[b + 1, nxt]))
            best = min(best, float(h[0].min()) * hours)
    return best


@pytest.mark.parametrize("seed", range(3))
def test_longer_plans_match_the_floor_sweep_oracle(seed):
    """Problems too long to enumerate (6-8 layers), billing granules of 0 to an hour and a
    startup class per type, against floor_sweep_oracle: the sweep's reach jumps, Thr_max and
    per-sample bounds stay exact over plans of many stages, with and without same-type cuts."""
    rng = np.random.default_rng(3000 + seed)
    feasible = 0
    for n in range(6):
        p = _startup_heavy(rng, 6 + n % 3, 3)
        p = dataclasses.replace(p, available=(None,) * p.num_types)
        for cuts in (False, True):
            want = floor_sweep_oracle(p, cuts)
            scheduler = ExactScheduler(ExactScheduler.Config(allow_same_type_cuts=cuts))
            try:
                got = evaluate_plan(p, scheduler.schedule(p, Evaluator(p, "least")),
                                    "least").cost_usd
            except NoFeasiblePlan:
                got = math.inf
            assert same_cost(got, want), (n, cuts, got, want, scheduler.notes)
            feasible += math.isfinite(want)
    assert feasible >= 4


def test_cheaper_plans_with_same_type_cuts_are_outside_the_default_search():
    """A 32 x 32 problem billed one whole hour whatever the plan (granule 3600 s, 1e4 samples,
    startups 120-300 s), so a plan costs its USD per hour: the sweep's optimum, with and
    without same-type cuts, equals the floor-sweep oracle's. The cheapest plan cuts runs of
    one type (10 stages, 2.69 USD): it is outside the default search space (maximal runs,
    7 stages, 3.51 USD, proven optimal there), not a plan the default sweep's bounds lost."""
    p = random_default_problem(np.random.default_rng(7), 32, 32)
    assert p.unit_costs.billing_granularity_s == 3600.0 and p.num_samples == 1e4
    got = {}
    for cuts in (False, True):
        for mode in ("least", "exact"):
            scheduler = ExactScheduler(ExactScheduler.Config(allow_same_type_cuts=cuts))
            plan = scheduler.schedule(p, Evaluator(p, mode))
            got[cuts, mode] = evaluate_plan(p, plan, mode).cost_usd
            assert scheduler.notes["proven_optimal"]
            assert len(plan.stages) == (10 if cuts else 7)
        assert got[cuts, "least"] == got[cuts, "exact"] == pytest.approx(
            floor_sweep_oracle(p, cuts), rel=1e-12)
    assert got[False, "least"] == pytest.approx(3.508978329, rel=1e-9)
    assert got[True, "least"] == pytest.approx(2.685563066, rel=1e-9)
