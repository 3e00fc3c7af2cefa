"""The analytic cost model: docs/design.md's reference formulation, one plan at a time.

This is the contract every other evaluator (the vectorised batch path, the exact DP, the
simulator with its effects off) is tested against. Per stage, ET_g(k) and the mixed stages'
finish-together time come from cost/terms.py; then

    Thr = min_g B / ET_g(k_g);   hours = N / Thr / 3600;   Cost = hours * sum price_j * k_g

with a mixed stage counting every unit: sum_j price_j n_j.

Knowingly approximate: a steady pipeline with no fill/drain bubbles, no jitter, no contention
between stages sharing a network; the simulator (des/) measures what this misses.
Provisioning: `least` gives each stage the fewest units that meet the limit; `exact` sweeps the
bottleneck level theta over every candidate stage throughput and keeps the cheapest.
"""

from __future__ import annotations

import math

import numpy as np

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult, StageStats
from heterps_sim.cost import amdahl, dominant, ps_traffic
from heterps_sim.cost.terms import (  # noqa: F401  (re-exported: the cost model's public names)
    MAX_REPLICAS,
    MODES,
    MixedTerms,
    PlanError,
    StageTerms,
    plan_stages,
    stage_terms,
    stage_type_indices,
)


def _describe(problem: Problem, g: int, t: StageTerms) -> str:
    a, b = problem.layer_names[t.first], problem.layer_names[t.last]
    span = a if a == b else f"{a}..{b}"
    on = "+".join(f"{n}x{problem.type_names[j]}" for j, n in t.groups()) \
        if isinstance(t, MixedTerms) else problem.type_names[t.type_index]
    return f"stage {g} ({span} on {on})"


def _unrunnable_reason(problem: Problem, terms: list[StageTerms]) -> str:
    for g, t in enumerate(terms):
        for j in stage_type_indices(t):
            for i in range(t.first, t.last + 1):
                if not problem.runnable[i, j]:
                    return (f"{_describe(problem, g, t)}: layer {problem.layer_names[i]} cannot "
                            f"run on {problem.type_names[j]} (its state does not fit the memory)")
    return ""


def _unit_range_reason(problem: Problem, g: int, t, k: int | None) -> str:
    """Default model: why a single-type stage cannot have k units (None: any count), or ""."""
    if not getattr(t, "default", False):
        return ""
    c = problem.unit_costs
    if t.k_lo > t.k_hi or (k is not None and k < t.k_lo):
        need = "any number of" if t.k_lo > 1 << 30 else f"at least {t.k_lo}"
        return (f"{_describe(problem, g, t)}: its memory ({problem.type_names[t.type_index]}) "
                f"holds the stage only with {need} units"
                + (f", but the minimum batch per unit ({c.min_unit_batch}) allows at most "
                   f"{t.k_hi}" if t.k_lo <= 1 << 30 else "") + (f"; the plan gives {k}" if k else ""))
    if k is not None and k > t.k_hi:
        return (f"{_describe(problem, g, t)}: {k} units get fewer than the minimum batch per "
                f"unit ({c.min_unit_batch} samples; at most {t.k_hi} units)")
    return ""


def ps_cap(problem: Problem) -> float:
    """Default model: samples/s at which the parameter server's shared bandwidth is full
    (cost/ps_traffic.py); inf under the paper model."""
    return ps_traffic.max_throughput(problem) if problem.cost_model == "default" else math.inf


def _provision(problem: Problem, terms, fixed, theta: float) -> tuple[list[int] | None, str]:
    """Units per stage for bottleneck level theta, or None and why not."""
    ks = []
    cap = ps_cap(problem)
    if theta > cap * (1 + 1e-12):
        return None, (f"the parameter server moves at most {cap:.6g} samples/s of embedding "
                      f"traffic, below {theta:.6g} samples/s")
    for g, (t, k_fixed) in enumerate(zip(terms, fixed)):
        reason = _unit_range_reason(problem, g, t, k_fixed)
        if reason:
            return None, reason
        k = k_fixed if k_fixed is not None else t.least_units(problem.batch_size, theta)
        if k is None:
            best = problem.batch_size / t.min_exec_time()
            return None, (f"{_describe(problem, g, t)}: cannot reach {theta:.6g} samples/s with any "
                          f"number of units (at most {best:.6g} samples/s as units grow)")
        if k > MAX_REPLICAS:
            return None, f"{_describe(problem, g, t)}: needs {k} units, above the {MAX_REPLICAS} bound"
        ks.append(k)
    return ks, _cap_violation(problem, terms, ks)


def _cap_violation(problem: Problem, terms, ks) -> str:
    used: dict[int, list[tuple[int, int]]] = {}
    for g, (t, k) in enumerate(zip(terms, ks)):
        for j, n in t.groups(k):
            used.setdefault(j, []).append((g, n))
    for j, stages in used.items():
        cap = problem.available[j]
        total = sum(n for _, n in stages)
        stages = [g for g, _ in stages]
        if cap is not None and total > cap:
            return (f"type {problem.type_names[j]}: plan needs {total} units, {cap} available "
                    f"(stages {', '.join(map(str, stages))})")
    return ""


def _cost(problem: Problem, terms, ks) -> tuple[float, float, float]:
    """(throughput, cost_per_hour, cost_usd) of a provisioned plan."""
    thr = min(problem.batch_size / t.exec_time(k) for t, k in zip(terms, ks))
    per_hour = float(sum(_stage_price(problem, t, k) for t, k in zip(terms, ks)))
    if problem.cost_model != "default":
        return thr, per_hour, problem.num_samples / thr / 3600.0 * per_hour
    thr = min(thr, ps_cap(problem))
    return thr, per_hour, job_cost(problem, per_hour, thr, plan_startup_s(problem, terms))


def plan_startup_s(problem: Problem, terms) -> float:
    """Default model: the slowest start among the plan's types (every unit waits for it)."""
    starts = problem.unit_costs.startup_s
    return float(max(starts[j] for t in terms for j in stage_type_indices(t)))


def fixed_price_per_hour(problem: Problem) -> float:
    """USD per hour a plan pays whatever its stages: the parameter-server hosts the problem
    prices (0 when it prices none). Every plan of the problem pays it, so job_cost adds it and
    every search adds it to each plan's stage prices. The paper model is the published
    formula (N / Thr x the stages' prices, no parameter server), so it prices none."""
    if problem.cost_model != "default":
        return 0.0
    ps = getattr(problem, "ps", None)
    return float(getattr(ps, "price_per_hour", 0.0) or 0.0)


def ps_extra(problem: Problem) -> dict:
    """RunResult.extra["ps_hosts"] of a priced PS ({} for a free one): hosts and USD/h (not
    extra["ps"], the engine's PS counters).
    A result's cost_per_hour is its stages' units; cost_usd includes this price too."""
    ps = getattr(problem, "ps", None)
    if ps is None or not getattr(ps, "host_type", ""):
        return {}
    return {"ps_hosts": {"resource": ps.host_type, "num_shards": ps.num_shards,
                         "price_per_hour": float(ps.price_per_hour)}}


def job_cost(problem: Problem, per_hour: float, thr: float, startup_s: float) -> float:
    """Default model: USD of the job: every unit billed from launch (startup) to the end of
    N samples at thr, rounded up to the billing granularity; `per_hour` is the stages' price,
    the fixed price (fixed_price_per_hour: the parameter-server hosts) is added here."""
    run_s = problem.num_samples / thr
    return (per_hour + fixed_price_per_hour(problem)) * dominant.billed_hours(
        startup_s + run_s, problem.unit_costs.billing_granularity_s)


def billing_extra(problem: Problem, terms, thr: float) -> dict:
    """RunResult.extra["billing"] of a feasible plan under the default model: what job_cost
    bills (the slowest start among the plan's types, the run, the granule they round up to,
    the hours billed), so a printed cost adds up on screen. {} under the paper model (it
    bills the run's hours only)."""
    if problem.cost_model != "default" or thr <= 0.0:
        return {}
    startup = plan_startup_s(problem, terms)
    run_s = problem.num_samples / thr
    granule = float(problem.unit_costs.billing_granularity_s)
    return {"billing": {"startup_s": startup, "run_s": run_s, "granularity_s": granule,
                        "billed_hours": dominant.billed_hours(startup + run_s, granule)}}


def _stage_price(problem: Problem, t, k: int) -> float:
    """USD per hour of one stage's units."""
    return float(sum(problem.price_per_hour[j] * n for j, n in t.groups(k)))


def _candidate_thetas(problem: Problem, terms, fixed, ks0, best_cost: float) -> list[float]:
    """Every stage throughput B/ET_g(k) >= TL worth trying as the bottleneck level."""
    limits = [t.exec_time(k) if k is not None else t.min_exec_time() for t, k in zip(terms, fixed)]
    # A stage with no serial part (alpha = 1, only possible in a hand-built Problem) has no
    # Amdahl ceiling; the MAX_REPLICAS bound then ends the search.
    ceiling = min((problem.batch_size / x if x > 0 else math.inf) for x in limits)
    ceiling = min(ceiling, ps_cap(problem))
    lower_hours_per_unit = problem.num_samples / 3600.0 / ceiling
    thetas = set()
    for t, k_fixed, k0 in zip(terms, fixed, ks0):
        if k_fixed is not None:
            thetas.add(problem.batch_size / t.exec_time(k_fixed))
            continue
        cap = problem.available[t.type_index]
        k_max = min(MAX_REPLICAS, cap if cap is not None else MAX_REPLICAS)
        if getattr(t, "default", False):
            k_max = min(k_max, t.k_hi)
        price = problem.price_per_hour[t.type_index]
        for k in range(k0, k_max + 1):
            # Any plan giving this stage k units costs at least price * k * (fewest hours).
            if price * k * lower_hours_per_unit > best_cost * (1 + 1e-12):
                break
            thetas.add(problem.batch_size / t.exec_time(k))
    if math.isfinite(ps_cap(problem)):
        thetas.add(ps_cap(problem))  # faster stages are wasted: the PS caps the plan here
    return sorted(th for th in thetas if th >= problem.throughput_limit and th <= ceiling * (1 + 1e-12))


def evaluate_plan(problem: Problem, plan: Plan, mode: str = "least") -> RunResult:
    """Provision (where a stage has no num_replicas) and cost one plan."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    terms = plan_stages(problem, plan)
    fixed = [s.num_replicas for s in plan.stages]
    label = "fixed" if all(k is not None for k in fixed) else mode
    reason = _unrunnable_reason(problem, terms)
    if reason:
        return _infeasible(problem, plan, terms, label, reason)
    ks, reason = _provision(problem, terms, fixed, problem.throughput_limit)
    if ks is None or reason:
        return _infeasible(problem, plan, terms, label, reason, ks)
    thr, per_hour, cost = _cost(problem, terms, ks)
    if thr < problem.throughput_limit * (1 - 1e-12):
        g = _bottleneck(problem, terms, ks)
        return _infeasible(problem, plan, terms, label, (
            f"throughput {thr:.6g} samples/s is below the limit {problem.throughput_limit:.6g} "
            f"(bottleneck {_describe(problem, g, terms[g])} with {ks[g]} units)"), ks)
    if mode == "exact" and label != "fixed":
        thetas = _candidate_thetas(problem, terms, fixed, ks, cost)
        cheapest = _cheapest_level if problem.cost_model != "default" else _cheapest_level_loop
        best = cheapest(problem, terms, fixed, np.array(thetas))
        if best is not None:
            ks_theta, _ = _provision(problem, terms, fixed, best)
            thr_t, per_hour_t, cost_t = _cost(problem, terms, ks_theta)
            if cost_t < cost * (1 - 1e-12):
                ks, thr, per_hour, cost = ks_theta, thr_t, per_hour_t, cost_t
    return _feasible(problem, plan, terms, label, ks, thr, per_hour, cost)


def _cheapest_level(problem: Problem, terms, fixed, thetas: np.ndarray, chunk: int = 4096):
    """The level among sorted `thetas` whose provisioning costs least (first on ties), or None.

    `_provision` for every level at once (numpy, levels x stages); levels stop at the first one
    that fails, since units only grow with theta and every higher level fails too.
    """
    B = problem.batch_size
    mixed = [isinstance(t, MixedTerms) for t in terms]
    # A mixed stage (fixed units) enters as a constant: ET = its step time, no units or price
    # in the per-level arrays; its units and price are added as constants below.
    alpha = np.array([0.0 if mx else t.alpha for t, mx in zip(terms, mixed)])
    par = np.array([t.exec_time() if mx else t.parallel_s for t, mx in zip(terms, mixed)])
    ser = np.array([0.0 if mx else t.serial_s for t, mx in zip(terms, mixed)])
    types = np.array([t.type_index for t in terms])
    k_fixed = np.array([0 if k is None else k for k in fixed])
    weight = np.array([0.0 if mx else 1.0 for mx in mixed])
    caps = np.array([np.inf if a is None else a for a in problem.available], dtype=float)
    fixed_per_hour = 0.0
    for t, mx in zip(terms, mixed):
        if mx:
            fixed_per_hour += _stage_price(problem, t, 0)
            for j, n in t.groups():
                caps[j] -= n
    best_theta, best_cost = None, math.inf
    for start in range(0, len(thetas), chunk):
        th = thetas[start:start + chunk, None]
        slack = amdahl.slack(B / th, par, ser, alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = np.maximum(1.0, amdahl.units_for(par, alpha, slack))
        k = np.where(k_fixed > 0, k_fixed, np.where(slack > 0, k, np.inf))
        used = np.zeros((len(th), problem.num_types))
        np.add.at(used.T, types, (np.where(np.isfinite(k), k, 0.0) * weight).T)
        ok = np.isfinite(k).all(axis=1) & (k <= MAX_REPLICAS).all(axis=1) & (used <= caps).all(axis=1)
        stop = len(ok) if ok.all() else int(np.argmin(ok))
        if stop:
            k = k[:stop]
            thr = (B / amdahl.step_time(par, ser, alpha, k)).min(axis=1)
            per_hour = (problem.price_per_hour[types] * weight * k).sum(axis=1) + fixed_per_hour
            costs = problem.num_samples / thr / 3600.0 * per_hour
            i = int(np.argmin(costs))
            if costs[i] < best_cost:
                best_theta, best_cost = float(th[i, 0]), float(costs[i])
        if stop < len(ok):
            break
    return best_theta


def _cheapest_level_loop(problem: Problem, terms, fixed, thetas: np.ndarray):
    """_cheapest_level for the default model, one level at a time (its units come from
    dominant.least_units, not a closed form); stops at the first level that fails."""
    best_theta, best_cost = None, math.inf
    for th in thetas:
        ks, reason = _provision(problem, terms, fixed, float(th))
        if ks is None or reason:
            break
        cost = _cost(problem, terms, ks)[2]
        if cost < best_cost:
            best_theta, best_cost = float(th), cost
    return best_theta


def _bottleneck(problem: Problem, terms, ks) -> int:
    return int(np.argmin([problem.batch_size / t.exec_time(k) for t, k in zip(terms, ks)]))


def _stage_stats(problem: Problem, plan: Plan, terms, ks, thr: float) -> tuple[StageStats, ...]:
    stats = []
    for s, t, k in zip(plan.stages, terms, ks or [0] * len(terms)):
        et = t.exec_time(k) if k else math.inf
        stage_thr = problem.batch_size / et if k else 0.0
        busy = t.oct + t.odt
        stats.append(StageStats(
            layers=s.layers, resource=s.resource, num_replicas=int(k or 0), oct_s=t.oct,
            odt_s=t.odt, alpha=t.alpha, exec_time_s=et, throughput=stage_thr,
            utilisation=(thr / stage_thr) if stage_thr > 0 else 0.0,
            cost_per_hour=_stage_price(problem, t, k or 0),
            comm_share=(t.odt / busy) if busy > 0 else 0.0, replicas=s.replicas))
    return tuple(stats)


def _units(problem: Problem, terms, ks) -> dict[str, int]:
    units: dict[str, int] = {}
    for t, k in zip(terms, ks or []):
        for j, n in t.groups(k):
            name = problem.type_names[j]
            units[name] = units.get(name, 0) + int(n)
    return units


def _feasible(problem, plan, terms, label, ks, thr, per_hour, cost) -> RunResult:
    return RunResult(
        source="analytic", feasible=True, reason="", throughput=thr,
        step_time_s=problem.batch_size / thr, cost_usd=cost,
        hours=problem.num_samples / thr / 3600.0, cost_per_hour=per_hour, provisioning=label,
        throughput_limit=problem.throughput_limit, bottleneck_stage=_bottleneck(problem, terms, ks),
        stages=_stage_stats(problem, plan, terms, ks, thr), units_per_type=_units(problem, terms, ks),
        extra={**ps_extra(problem), **billing_extra(problem, terms, thr)})


def _infeasible(problem, plan, terms, label, reason, ks=None) -> RunResult:
    thr, per_hour = 0.0, 0.0
    if ks is not None and not _unrunnable_reason(problem, terms):
        thr, per_hour, _ = _cost(problem, terms, ks)
    return RunResult(
        source="analytic", feasible=False, reason=reason, throughput=thr,
        step_time_s=problem.batch_size / thr if thr > 0 else math.inf, cost_usd=math.inf,
        hours=math.inf, cost_per_hour=per_hour, provisioning=label,
        throughput_limit=problem.throughput_limit,
        stages=_stage_stats(problem, plan, terms, ks, thr), units_per_type=_units(problem, terms, ks),
        extra=ps_extra(problem))
