"""The exact optimum: the plan of least `cost.evaluate_plan(...).cost_usd` over ALL plans.

All plans = every type per layer (stages = maximal runs of one type) or, with
`allow_same_type_cuts`, also every cut of a run into adjacent stages of the same type.

Mode `exact` (provisioning sweeps the bottleneck level theta). At a fixed theta every stage is
provisioned on its own, k = least_units(theta), so f(theta) = min over plans of sum price_j*k
is a DP over (segment, type, next type) (exact_kernels.py). f never falls as theta grows, and
the plan p found at theta keeps its units up to Thr+(p), a hair (< 1e-9 relative: the ceil
tolerance) above its throughput Thr(p); its cost is N f(theta) / (3600 Thr(p)). Any plan q at
any level w is beaten, within that hair, by the plan found at the level whose interval holds
w, so one sweep theta_0 = TL, theta_{i+1} = just above Thr+(p_i) (exact_kernels.next_theta:
1e-12 relative above, checked to really change the units) finds the optimum. It stops when
f is infinite or N f(theta) / (3600 Thr_max) >= best, Thr_max bounding the throughput of every
plan that could still be cheaper (a max-min DP with each stage at the most units it could
have while its own cost per sample stays below the best).

Mode `least` (every stage at k(TL)). The options and their throughputs are fixed; a plan costs
N F / (3600 Thr) with Thr its slowest stage. Sweep a floor mu on the options' throughputs:
mu_0 = TL, mu_{i+1} = next float above Thr(p_i); the same DP minimises F among options >= mu.

Both: options whose own cost per sample already exceeds the best plan's are left out (they
cannot be in a cheaper plan: Thr <= every stage's throughput). Shared caps (`available`) couple
stages: when the DP's plan breaks one, exact_caps.py searches exactly under the caps it broke
(adding any other cap the answer breaks). That search is bounded by `max_labels` labels per
level; if a bound is hit the best plan found is returned and notes["proven_optimal"] is False.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import Field

from ..cost import MAX_REPLICAS
from ..plan import Plan, Stage
from ..problem import Problem
from .base import Evaluator, NoFeasiblePlan, SchedulerConfig
from .exact_caps import LIMIT, LIMIT_NO_PLAN, NONE_BELOW_UB, PROVEN, capped_search
from .exact_kernels import (BOTTLENECK, INF, K_BUDGET, K_LEAST, K_MAX, SUM, dp_pass, next_theta,
                            reconstruct, stage_values)


class ExactScheduler:
    """Cheapest plan over all plans (DP swept over the bottleneck level; exact under caps)."""

    name = "exact"

    class Config(SchedulerConfig):
        allow_same_type_cuts: bool = False
        """Also consider cutting a run of one type into several adjacent stages."""
        max_labels: int = Field(default=200_000, ge=1)
        """Labels one capped search may create (per level); past it the best plan found is
        returned and notes["proven_optimal"] is False. Only used when caps bind."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        sweep = _Sweep(problem, self.config, evaluate.mode)
        try:
            return sweep.run()
        finally:
            self.notes = sweep.notes()


@dataclass
class _Found:
    """One plan met by the sweep, costed as the DP costed it."""

    stages: tuple  # (first, last, type, next type) arrays, length n
    ks: np.ndarray
    ets: np.ndarray
    terms: np.ndarray
    per_hour: float
    throughput: float
    lower: float
    """A lower bound on f at this level (per hour) for any plan that could still win."""


class _Sweep:
    def __init__(self, problem: Problem, config: ExactScheduler.Config, mode: str) -> None:
        if mode not in ("least", "exact"):
            raise ValueError(f"mode must be 'least' or 'exact', got {mode!r}")
        self.problem, self.config, self.mode = problem, config, mode
        self.batch = float(problem.batch_size)
        self.limit = float(problem.throughput_limit)
        self.floor = problem.throughput_limit * (1 - 1e-12)  # cost.evaluate_plan's test
        self.allow_cuts = bool(config.allow_same_type_cuts)
        self.t = _tables(problem)
        self.budget = INF
        self.passes = self.levels = self.labels = self.cap_searches = 0
        self.proven = True
        self.best: tuple[float, _Found] | None = None
        self.stop_reason = ""

    def notes(self) -> dict:
        notes = {"mode": self.mode, "proven_optimal": self.proven, "dp_passes": self.passes,
                 "thetas_tried": self.levels, "labels": self.labels,
                 "cap_searches": self.cap_searches}
        if self.best is not None:
            cost, found = self.best
            notes.update(predicted_cost_usd=cost, predicted_throughput=found.throughput)
        return notes

    # -- the sweep ----------------------------------------------------------------------
    def run(self) -> Plan:
        self._check_runnable()
        binv_tl = self.batch / self.limit
        fastest = self._max_throughput(K_MAX, binv_tl, -1.0)
        thr_max = fastest if self.mode == "exact" else self._max_throughput(
            K_LEAST, binv_tl, self.floor)
        found, filtered = self._solve(binv_tl, self.floor, False, prune=False)
        if found is None:
            raise NoFeasiblePlan(self._why_infeasible(fastest))
        guard = self.mode == "exact" and filtered > 0
        stale, refined = False, -5
        while found is not None:
            self.levels += 1
            cost = self.problem.num_samples / found.throughput / 3600.0 * found.per_hour
            if self.best is None or cost < self.best[0]:
                self.best = (cost, found)
                self.budget = cost * 3600.0 * self.batch / self.problem.num_samples * (1 + 1e-12)
                stale = True
            # No plan with f >= found.lower and throughput <= `reach` beats the best.
            reach = found.lower * self.problem.num_samples / 3600.0 / self.best[0]
            if reach < thr_max and stale and self.levels >= refined + 5:
                thr_max, stale, refined = min(thr_max, self._bounded_throughput(binv_tl)), \
                    False, self.levels
            if reach >= thr_max:
                break
            if self.mode == "exact":
                theta = next_theta(found.terms, found.ks, self.t.kmax[found.stages[2]],
                                   self.batch, self.t.par)
                theta = max(theta, reach / (1 + 2e-9))
                if not math.isfinite(theta):
                    break
                found, _ = self._solve(self.batch / theta, -1.0, guard, thr_max=thr_max)
            else:
                mu = max(float(np.nextafter(found.throughput, INF)), reach * (1 - 1e-12))
                found, _ = self._solve(binv_tl, mu, False, thr_max=thr_max)
        if self.best is None:
            raise NoFeasiblePlan(self.stop_reason or self._why_infeasible(fastest))
        return self._plan(self.best[1])

    def _solve(self, binv: float, thr_floor: float, guard: bool, prune: bool = True,
               thr_max: float = INF) -> tuple[_Found | None, int]:
        """The cheapest plan at one level (caps respected), or None; + filtered options met."""
        t = self.t
        guard_binv = self.batch / self.limit if guard else -1.0
        h, ch_b, ch_g, lv_arg, s1_arg, s2_arg, filtered = dp_pass(
            *t.dp_args(), binv, K_LEAST, self.budget, thr_floor, guard_binv, self.floor, SUM,
            self.allow_cuts, prune)
        self.passes += 1
        n, *stages = reconstruct(h, ch_b, ch_g, lv_arg, s1_arg, s2_arg, t.lvl, self.allow_cuts)
        if n == 0:
            return None, filtered
        found = self._found(n, stages, binv)
        broken = self._broken_caps(found)
        if not broken:
            return found, filtered
        relaxed = found.per_hour
        ub = INF if self.best is None else (
            self.best[0] * 3600.0 * thr_max / self.problem.num_samples)
        while True:
            cidx = np.full(t.m, -1, np.int64)
            for c, j in enumerate(sorted(broken)):
                cidx[j] = c
            capv = np.array([self.problem.available[j] for j in sorted(broken)], np.int64)
            status, n, *stages, cost, labels = capped_search(
                t.oct_t, t.odt_t, t.aoct_t, t.run_t, t.ext, t.lvl, t.price, t.kmax, t.batch,
                t.par, binv, self.budget, thr_floor, guard_binv, self.floor, self.allow_cuts, h,
                cidx, capv, ub, self.config.max_labels)
            self.labels += int(labels)
            self.cap_searches += 1
            if status in (LIMIT, LIMIT_NO_PLAN):
                self.proven = False
            if n == 0:
                self.stop_reason = self._why_capped(status)
                return None, filtered
            found = self._found(n, stages, binv)
            more = self._broken_caps(found) - broken
            if not more:
                found.lower = found.per_hour if status == PROVEN else relaxed
                return found, filtered
            broken |= more

    # -- pieces -------------------------------------------------------------------------
    def _found(self, n: int, stages: list, binv: float) -> _Found:
        t = self.t
        first, last, typ, nxt = (np.asarray(s[:n]) for s in stages)
        ks, ets, terms = stage_values(n, first, last, typ, nxt, t.oct_t, t.odt_t, t.aoct_t, t.ext,
                                      t.lvl, t.price, t.kmax, t.batch, t.par, binv)
        per_hour = float(sum(self.problem.price_per_hour[j] * int(k) for j, k in zip(typ, ks)))
        throughput = min(self.batch / float(et) for et in ets)
        return _Found((first, last, typ, nxt), ks, ets, terms, per_hour, throughput, per_hour)

    def _broken_caps(self, found: _Found) -> set[int]:
        used: dict[int, int] = {}
        for j, k in zip(found.stages[2], found.ks):
            used[int(j)] = used.get(int(j), 0) + int(k)
        return {j for j, u in used.items()
                if self.problem.available[j] is not None and u > self.problem.available[j]}

    def _max_throughput(self, k_rule: int, binv: float, thr_floor: float) -> float:
        """Max over plans of the slowest stage's throughput under a unit rule (a max-min DP)."""
        h, *_ = dp_pass(*self.t.dp_args(), binv, k_rule, self.budget, thr_floor, -1.0, -1.0,
                        BOTTLENECK, self.allow_cuts, True)
        self.passes += 1
        et = float(h[0].min())
        return self.batch / et if et > 0 else INF

    def _bounded_throughput(self, binv_tl: float) -> float:
        """Max throughput of any plan that could beat the best (each stage within budget)."""
        if self.mode == "exact":
            return self._max_throughput(K_BUDGET, binv_tl, -1.0)
        return self._max_throughput(K_LEAST, binv_tl, self.floor)

    def _plan(self, found: _Found) -> Plan:
        names, types = self.problem.layer_names, self.problem.type_names
        first, last, typ, _ = found.stages
        return Plan(stages=tuple(Stage(layers=tuple(names[a:b + 1]), resource=types[int(j)])
                                 for a, b, j in zip(first, last, typ)))

    def _check_runnable(self) -> None:
        for i, name in enumerate(self.problem.layer_names):
            if not self.t.run_t[:, i].any():
                raise NoFeasiblePlan(f"layer {name} cannot run on any resource type"
                                     + (" within the availability caps" if any(
                                         a == 0 for a in self.problem.available) else ""))

    def _why_infeasible(self, fastest: float) -> str:
        if self.stop_reason:
            return self.stop_reason
        if fastest < self.floor:
            return (f"no plan reaches {self.limit:.6g} samples/s: the fastest possible is "
                    f"{fastest:.6g} samples/s (every stage at its unit bound: the type's "
                    f"availability or {MAX_REPLICAS})")
        return (f"no plan reaches {self.limit:.6g} samples/s: every candidate stage falls short "
                "by less than the 1e-9 provisioning tolerance")

    def _why_capped(self, status: int) -> str:
        if status == LIMIT_NO_PLAN:
            return (f"the capped search stopped at max_labels={self.config.max_labels} without "
                    "finding a plan that fits the availability caps; the problem may still be "
                    "feasible (raise max_labels)")
        if status == NONE_BELOW_UB and self.best is None:
            caps = ", ".join(f"{n}={a}" for n, a in zip(self.problem.type_names,
                                                       self.problem.available) if a is not None)
            return (f"no plan reaches {self.limit:.6g} samples/s within the availability caps "
                    f"({caps}): stages on one type share its units")
        return ""


@dataclass
class _Tables:
    """The problem as the kernels read it (types x layers, NaN-free, float64)."""

    oct_t: np.ndarray
    odt_t: np.ndarray
    aoct_t: np.ndarray
    """alpha * oct: a stage's alpha is its sum over the sum of oct"""
    run_t: np.ndarray
    ext: np.ndarray
    """ext[b, v] = boundary_bytes[b] / lev[v] + latency: the boundary term on bandwidth lev[v]"""
    lvl: np.ndarray
    """lvl[j]: index of net[j] among the distinct bandwidths lev (ascending)"""
    order: np.ndarray
    """the types by level, highest level first"""
    price: np.ndarray
    kmax: np.ndarray
    """units one stage may have: min(available, MAX_REPLICAS)"""
    batch: float
    par: bool

    @property
    def m(self) -> int:
        return self.oct_t.shape[0]

    def dp_args(self) -> tuple:
        return (self.oct_t, self.odt_t, self.aoct_t, self.run_t, self.ext, self.lvl, self.order,
                self.price, self.kmax, self.batch, self.par)


def _tables(problem: Problem) -> _Tables:
    kmax = np.array([MAX_REPLICAS if a is None else min(int(a), MAX_REPLICAS)
                     for a in problem.available], np.int64)
    run = problem.runnable & ~np.isnan(problem.alpha) & (kmax >= 1)[None, :]

    def cols(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.where(run, a, 0.0).T, dtype=np.float64)

    net = np.asarray(problem.network_bytes_per_s, np.float64)
    lev = np.unique(net)
    lvl = np.searchsorted(lev, net).astype(np.int64)
    order = np.lexsort((np.arange(len(net)), -lvl)).astype(np.int64)
    bnd = np.asarray(problem.boundary_bytes, np.float64)
    ext = bnd[:, None] / lev[None, :] + float(problem.latency_s)  # as stage_terms adds it
    return _Tables(
        oct_t=cols(problem.oct_s), odt_t=cols(problem.odt_s),
        aoct_t=cols(problem.alpha * problem.oct_s), run_t=np.ascontiguousarray(run.T),
        ext=np.ascontiguousarray(ext), lvl=lvl, order=order,
        price=np.asarray(problem.price_per_hour, np.float64), kmax=kmax,
        batch=float(problem.batch_size), par=bool(problem.odt_parallel))
