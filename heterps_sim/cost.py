"""The analytic cost model: DESIGN.md's reference formulation, one plan at a time.

This is the contract every other evaluator (the vectorised batch path, the exact DP, the
simulator with its effects off) is tested against. A stage g = layers a..b on type j, followed
by a stage on type j' (none for the last):

    OCT_g   = sum oct_s[i][j]                       (compute, one unit, one batch)
    ODT_g   = sum odt_s[i][j] + boundary_bytes[b] / min(net[j], net[j']) + latency   (not last)
    alpha_g = sum alpha[i][j] * oct_s[i][j] / OCT_g  (Amdahl parallel fraction)
    P_g = OCT_g + (ODT_g if odt_parallel else 0);   S_g = (0 if odt_parallel else ODT_g)
    ET_g(k) = P_g * ((1 - alpha_g) + alpha_g / k) + S_g
    Thr = min_g B / ET_g(k_g);   hours = N / Thr / 3600;   Cost = hours * sum price_j * k_g

Mixed stages (plan.Stage.replicas, n_j units of type j; always fixed counts): each type gets its
own terms as above, with c_j = (1 - alpha_j) P_j + S_j and a_j = alpha_j P_j, and the units split
the batch's parallel part so that all finish together (sharing.finish_together):
    ET_g = T, the least T >= max_j c_j with sum_j n_j min(CAP / K, (T - c_j) / a_j) = 1
         = (1 + sum_j n_j c_j / a_j) / sum_j n_j / a_j   when no unit reaches CAP x its equal share
(one type: c + a / k, the ET above). Boundary rule: a transfer between stages uses the slowest
network among ALL types on both sides (one type each side: min(net_j, net_j') as above), since
some microbatch crosses every pair. Cost counts every unit: sum_j price_j n_j.

Knowingly approximate: a steady pipeline with no fill/drain bubbles, no jitter, no contention
between stages sharing a network; the simulator (des/) measures what this misses.
Provisioning: `least` gives each stage the fewest units that meet the limit; `exact` sweeps the
bottleneck level theta over every candidate stage throughput and keeps the cheapest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .plan import Plan
from .problem import Problem
from .result import RunResult, StageStats
from .sharing import finish_together

MODES = ("least", "exact")
MAX_REPLICAS = 65536
"""No stage is given more units than this (a safety bound; real caps come from `available`)."""
CEIL_TOLERANCE = 1e-9
"""k = ceil(x - 1e-9): a stage that meets theta exactly is not given one unit too many."""


class PlanError(ValueError):
    """The plan does not fit the problem (wrong layers, unknown type): bad input, not a result."""


@dataclass(frozen=True, slots=True)
class StageTerms:
    first: int
    last: int
    type_index: int
    oct: float
    odt: float
    alpha: float
    parallel_s: float
    serial_s: float

    def exec_time(self, k: int) -> float:
        return self.parallel_s * ((1.0 - self.alpha) + self.alpha / k) + self.serial_s

    def groups(self, k: int) -> list[tuple[int, int]]:
        """(type index, units) of the stage with k units."""
        return [(self.type_index, k)]

    def min_exec_time(self) -> float:
        """ET as k -> infinity (the Amdahl limit)."""
        return self.parallel_s * (1.0 - self.alpha) + self.serial_s

    def least_units(self, batch_size: int, theta: float) -> int | None:
        """Fewest units with B / ET(k) >= theta; None when no number of units reaches theta."""
        slack = batch_size / theta - (1.0 - self.alpha) * self.parallel_s - self.serial_s
        if slack <= 0:
            return None
        return max(1, math.ceil(self.alpha * self.parallel_s / slack - CEIL_TOLERANCE))


@dataclass(frozen=True, slots=True)
class MixedTerms:
    """A mixed stage: one StageTerms per type (primary first) and the units of each.

    first/last/type_index/oct/odt/alpha/parallel_s/serial_s are the primary type's (what
    per-stage tables show); exec_time is the finish-together step time of all the units.
    """

    parts: tuple[StageTerms, ...]
    counts: tuple[int, ...]

    first = property(lambda self: self.parts[0].first)
    last = property(lambda self: self.parts[0].last)
    type_index = property(lambda self: self.parts[0].type_index)
    oct = property(lambda self: self.parts[0].oct)
    odt = property(lambda self: self.parts[0].odt)
    alpha = property(lambda self: self.parts[0].alpha)
    parallel_s = property(lambda self: self.parts[0].parallel_s)
    serial_s = property(lambda self: self.parts[0].serial_s)

    def split(self) -> tuple[float, list[float]]:
        """(step time, batch share of one unit of each type): sharing.finish_together."""
        serial = [(1.0 - t.alpha) * t.parallel_s + t.serial_s for t in self.parts]
        parallel = [t.alpha * t.parallel_s for t in self.parts]
        return finish_together(serial, parallel, list(self.counts))

    def exec_time(self, k: int | None = None) -> float:
        return self.split()[0]

    def min_exec_time(self) -> float:
        return self.exec_time()

    def groups(self, k: int | None = None) -> list[tuple[int, int]]:
        return [(t.type_index, n) for t, n in zip(self.parts, self.counts)]


def stage_terms(problem: Problem, first: int, last: int, j: int, next_j: int,
                bandwidth: float | None = None) -> StageTerms:
    """Terms of the stage layers first..last on type j, followed by type next_j (-1: last).

    `bandwidth` overrides min(net[j], net[next_j]) for the boundary (mixed stages on a side).
    """
    octs = problem.oct_s[first:last + 1, j]
    oct_total = float(octs.sum())
    odt_total = float(problem.odt_s[first:last + 1, j].sum())
    if next_j >= 0:
        if bandwidth is None:
            bandwidth = min(problem.network_bytes_per_s[j], problem.network_bytes_per_s[next_j])
        odt_total += float(problem.boundary_bytes[last]) / bandwidth + problem.latency_s
    alpha = float((problem.alpha[first:last + 1, j] * octs).sum() / oct_total) if oct_total > 0 else 0.0
    if problem.odt_parallel:
        parallel_s, serial_s = oct_total + odt_total, 0.0
    else:
        parallel_s, serial_s = oct_total, odt_total
    return StageTerms(first, last, j, oct_total, odt_total, alpha, parallel_s, serial_s)


def plan_stages(problem: Problem, plan: Plan) -> list[StageTerms]:
    """Stage terms of a plan, or PlanError when it does not cover the model's layers in order."""
    issues = plan.problems(problem.layer_names, problem.type_names)
    if issues:
        raise PlanError("; ".join(issues))
    types = [[problem.type_index(t) for t, _ in s.groups] for s in plan.stages]
    net = problem.network_bytes_per_s
    terms, first = [], 0
    for g, stage in enumerate(plan.stages):
        last = first + len(stage.layers) - 1
        nxt = types[g + 1] if g + 1 < len(types) else []
        bandwidth = float(min(net[j] for j in types[g] + nxt)) if nxt else None
        parts = tuple(stage_terms(problem, first, last, j, nxt[0] if nxt else -1, bandwidth)
                      for j in types[g])
        terms.append(MixedTerms(parts, tuple(n for _, n in stage.groups))
                     if stage.is_mixed else parts[0])
        first = last + 1
    return terms


def stage_type_indices(t) -> list[int]:
    """Type indices of a stage's terms (several for a mixed stage)."""
    return [p.type_index for p in t.parts] if isinstance(t, MixedTerms) else [t.type_index]


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


def _provision(problem: Problem, terms, fixed, theta: float) -> tuple[list[int] | None, str]:
    """Units per stage for bottleneck level theta, or None and why not."""
    ks = []
    for g, (t, k_fixed) in enumerate(zip(terms, fixed)):
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
    return thr, per_hour, problem.num_samples / thr / 3600.0 * per_hour


def _stage_price(problem: Problem, t, k: int) -> float:
    """USD per hour of one stage's units."""
    return float(sum(problem.price_per_hour[j] * n for j, n in t.groups(k)))


def _candidate_thetas(problem: Problem, terms, fixed, ks0, best_cost: float) -> list[float]:
    """Every stage throughput B/ET_g(k) >= TL worth trying as the bottleneck level."""
    limits = [t.exec_time(k) if k is not None else t.min_exec_time() for t, k in zip(terms, fixed)]
    # A stage with no serial part (alpha = 1, only possible in a hand-built Problem) has no
    # Amdahl ceiling; the MAX_REPLICAS bound then ends the search.
    ceiling = min((problem.batch_size / x if x > 0 else math.inf) for x in limits)
    lower_hours_per_unit = problem.num_samples / 3600.0 / ceiling
    thetas = set()
    for t, k_fixed, k0 in zip(terms, fixed, ks0):
        if k_fixed is not None:
            thetas.add(problem.batch_size / t.exec_time(k_fixed))
            continue
        cap = problem.available[t.type_index]
        k_max = min(MAX_REPLICAS, cap if cap is not None else MAX_REPLICAS)
        price = problem.price_per_hour[t.type_index]
        for k in range(k0, k_max + 1):
            # Any plan giving this stage k units costs at least price * k * (fewest hours).
            if price * k * lower_hours_per_unit > best_cost * (1 + 1e-12):
                break
            thetas.add(problem.batch_size / t.exec_time(k))
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
        best = _cheapest_level(problem, terms, fixed, np.array(thetas))
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
        slack = B / th - (1.0 - alpha) * par - ser
        with np.errstate(divide="ignore", invalid="ignore"):
            k = np.maximum(1.0, np.ceil(alpha * par / slack - CEIL_TOLERANCE))
        k = np.where(k_fixed > 0, k_fixed, np.where(slack > 0, k, np.inf))
        used = np.zeros((len(th), problem.num_types))
        np.add.at(used.T, types, (np.where(np.isfinite(k), k, 0.0) * weight).T)
        ok = np.isfinite(k).all(axis=1) & (k <= MAX_REPLICAS).all(axis=1) & (used <= caps).all(axis=1)
        stop = len(ok) if ok.all() else int(np.argmin(ok))
        if stop:
            k = k[:stop]
            thr = (B / (par * ((1.0 - alpha) + alpha / k) + ser)).min(axis=1)
            per_hour = (problem.price_per_hour[types] * weight * k).sum(axis=1) + fixed_per_hour
            costs = problem.num_samples / thr / 3600.0 * per_hour
            i = int(np.argmin(costs))
            if costs[i] < best_cost:
                best_theta, best_cost = float(th[i, 0]), float(costs[i])
        if stop < len(ok):
            break
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
        stages=_stage_stats(problem, plan, terms, ks, thr), units_per_type=_units(problem, terms, ks))


def _infeasible(problem, plan, terms, label, reason, ks=None) -> RunResult:
    thr, per_hour = 0.0, 0.0
    if ks is not None and not _unrunnable_reason(problem, terms):
        thr, per_hour, _ = _cost(problem, terms, ks)
    return RunResult(
        source="analytic", feasible=False, reason=reason, throughput=thr,
        step_time_s=problem.batch_size / thr if thr > 0 else math.inf, cost_usd=math.inf,
        hours=math.inf, cost_per_hour=per_hour, provisioning=label,
        throughput_limit=problem.throughput_limit,
        stages=_stage_stats(problem, plan, terms, ks, thr), units_per_type=_units(problem, terms, ks))
