"""The exact optimum: the plan of least `cost.evaluate_plan(...).cost_usd` over ALL plans.

All plans = every type per layer (stages = maximal runs of one type) or, with
`allow_same_type_cuts`, also every cut of a run into adjacent stages of the same type.

Mode `exact` (provisioning sweeps the bottleneck level theta). At a fixed theta every stage is
provisioned on its own, k = least_units(theta), so f(theta) = min over plans of sum price_j*k
is a DP over (segment, type, next type) (schedulers/exact/kernels.py). f never falls as theta grows, and
the plan p found at theta keeps its units up to Thr+(p), a hair (< 1e-9 relative: the ceil
tolerance) above its throughput Thr(p); its cost is N f(theta) / (3600 Thr(p)). Any plan q at
any level w is beaten, within that hair, by the plan found at the level whose interval holds
w. So one sweep finds the optimum: theta_0 = TL, then theta_{i+1} = just above Thr+(p_i)
(exact_kernels.next_theta: 1e-12 relative above it, checked to really change the units), or
further: no plan with f >= f(theta_i) and throughput <= reach = N f(theta_i) / (3600 best)
costs less than the best, so the sweep jumps to reach (/(1 + 2e-9), inside the hair). It stops
when f is infinite, when reach passes Thr_max, a bound on the throughput of every plan that
could still be cheaper (a max-min DP, each stage at the most units it may have while its own
cost per sample stays below the best), or when N/3600 * min over plans of sum p k ET / B (a
lower bound on cost that never falls as theta grows) reaches the best. A stage that falls
short of TL when provisioned at TL (possible within the 1e-9 ceil tolerance) makes the
reference call the plan infeasible: once one shows up, such options are excluded (the guard).

Mode `least` (every stage at k(TL)). The options and their throughputs are fixed; a plan costs
N F / (3600 Thr) with Thr its slowest stage. Sweep a floor mu on the options' throughputs:
mu_0 = TL, mu_{i+1} = the next float above Thr(p_i), or reach; the same DP minimises F among
the options >= mu.

Both: options whose own cost per sample already exceeds the best plan's are left out (they
cannot be in a cheaper plan: Thr <= every stage's throughput). Shared caps (`available`)
couple stages; schedulers/exact/caps.py solves a level exactly when the DP's plan breaks one. Its search
is bounded by `max_labels` labels per level; if a bound is hit the best plan found is
returned and notes["proven_optimal"] is False.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from pydantic import Field

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.cost.reference import MAX_REPLICAS, fixed_price_per_hour, job_cost, ps_cap
from heterps_sim.cost.terms import boundary_latency_s, model_arrays
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, SchedulerConfig
from heterps_sim.schedulers.exact.caps import CapSolver
from heterps_sim.schedulers.exact.kernels import (
    BOTTLENECK,
    INF,
    K_BUDGET,
    K_LEAST,
    K_MAX,
    PER_SAMPLE,
    SUM,
    dp_pass,
    next_theta,
    reconstruct,
    stage_values,
)
from heterps_sim.schedulers.exact.mixed import top_up


class ExactScheduler:
    """Cheapest plan over all plans (DP swept over the bottleneck level; exact under caps).

    Returns stages without num_replicas: cost.evaluate_plan in the evaluator's mode provisions
    them and reproduces the cost. Raises NoFeasiblePlan saying why (the fastest throughput
    any plan reaches, or the caps). `notes` after a run: proven_optimal (False only when a
    capped search hit max_labels, or when the reference's alpha = 0 quirk, see
    _Sweep.reachable, hid a possibly cheaper plan), dp_passes (DP passes of any kind),
    thetas_tried (levels swept: theta in exact mode, the throughput floor in least mode),
    cap_levels (levels whose cheapest uncapped plan broke a shared cap), cap_searches and
    labels (A* runs and labels they made), predicted_cost_usd, predicted_throughput.
    `evaluate` is not called (the model is cost/reference.py's, mirrored by the kernels).
    """

    name = "exact"

    class Config(SchedulerConfig):
        allow_same_type_cuts: bool = False
        """Also consider cutting a run of one type into several adjacent stages. Off, the
        optimum is over maximal runs (the paper's stages) only; under the default model a cut
        can shed units that a stage's memory floor forces, so a plan with cuts may cost less
        (a random 32 x 32 problem: 3.51 USD over maximal runs, 2.69 USD with cuts)."""
        max_labels: int = Field(default=200_000, ge=1)
        """Labels one capped search may create (one per level, only when caps bind); past it
        the best plan found is returned and notes["proven_optimal"] is False."""
        two_stages: bool = False
        """Leave out plans of one stage (the async pricing's plans of staleness 0 are priced
        as they flush, which the stage model does not see: planner/searches.py searches them
        apart)."""
        mixed: bool = False
        """Also propose mixed-type stages (schedulers/exact/mixed.py): where caps bind, a stage tops up
        its type with other types' leftovers. The plan may then cost less than the
        single-type optimum, or exist where no single-type plan does."""
        mixed_candidates: int = Field(default=4, ge=0)
        """mixed: other types a stage may add (the runnable ones of least price x ET(1))."""
        mixed_max_types: int = Field(default=2, ge=1)
        """mixed: most distinct types in one stage."""
        mixed_max_units: int = Field(default=64, ge=1)
        """mixed: most units of an uncapped type that never reaches the limit alone."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        if not self.config.mixed:
            return self._sweep(problem, evaluate.mode)
        # mixed: the single-type optima under the caps and without them are the splits that
        # mixed.top_up fills with other types' leftovers
        splits = []
        try:
            splits.append(("capped", self._sweep(problem, evaluate.mode)))
        except NoFeasiblePlan:
            pass
        reason = self.notes.get("reason", "")
        uncapped = replace(problem, available=tuple(None for _ in problem.available))
        try:
            splits.append(("uncapped", self._sweep(uncapped, evaluate.mode)))
        except NoFeasiblePlan as exc:
            reason = reason or str(exc)
        plan, self.notes = top_up(problem, evaluate.mode, splits, reason, self.config)
        return plan

    def _sweep(self, problem: Problem, mode: str) -> Plan:
        if problem.cost_model == "default":
            return self._by_startup(problem, mode)
        sweep = _Sweep(problem, self.config, mode)
        try:
            return sweep.run()
        finally:
            self.notes = sweep.notes()

    def _by_startup(self, problem: Problem, mode: str) -> Plan:
        """Default model: every unit is billed from launch until the plan's slowest type has
        started, so a plan's cost depends on the set of types it uses. One sweep per distinct
        startup s, over the types that start within s, costing every plan as if it waited s:
        the optimum is found, at its true cost, in the sweep of its own slowest start. Each
        sweep only looks for plans cheaper than the best of the sweeps before it (its bound).
        The notes' counts add up over the sweeps."""
        starts = problem.unit_costs.startup_s
        best, best_notes, reasons, proven = None, {}, [], True
        counts = dict.fromkeys(("dp_passes", "thetas_tried", "cap_levels", "cap_searches",
                                "labels"), 0)
        for s_max in sorted(set(float(x) for x in starts)):
            sub = replace(problem, available=tuple(
                0 if starts[j] > s_max else a for j, a in enumerate(problem.available)))
            if not any(starts[j] == s_max and sub.available[j] != 0
                       for j in range(problem.num_types)):
                continue
            sweep = _Sweep(sub, self.config, mode, startup_s=s_max,
                           bound=INF if best is None else best[0])
            try:
                plan = sweep.run()
            except NoFeasiblePlan as exc:
                if best is None:  # else: nothing cheaper than the best so far
                    reasons.append(str(exc))
                plan = None
            finally:
                notes = sweep.notes()
                proven = proven and notes["proven_optimal"]
                for key in counts:
                    counts[key] += notes[key]
            if plan is not None and (best is None or notes["predicted_cost_usd"] < best[0]):
                best, best_notes = (notes["predicted_cost_usd"], plan), notes
        self.notes = {**(best_notes or {"mode": mode}), **counts, "proven_optimal": proven}
        if best is None:
            raise NoFeasiblePlan(reasons[-1] if reasons else "no resource type has units")
        return best[1]


@dataclass
class _Found:
    """One plan met by the sweep, costed as the DP costed it."""

    stages: tuple
    """(first layer, last layer, type, next type or -1) arrays, one entry per stage"""
    ks: np.ndarray
    ets: np.ndarray
    terms: np.ndarray
    per_hour: float
    throughput: float


class _Sweep:
    def __init__(self, problem: Problem, config: ExactScheduler.Config, mode: str,
                 startup_s: float = 0.0, bound: float = INF) -> None:
        if mode not in ("least", "exact"):
            raise ValueError(f"mode must be 'least' or 'exact', got {mode!r}")
        self.problem, self.config, self.mode = problem, config, mode
        self.batch = float(problem.batch_size)
        self.limit = float(problem.throughput_limit)
        self.binv_tl = self.batch / self.limit
        self.floor = problem.throughput_limit * (1 - 1e-12)  # cost.evaluate_plan's test
        self.allow_cuts = bool(config.allow_same_type_cuts)
        self.two_stages = bool(config.two_stages)
        self.startup_s = startup_s
        """default model: the start every unit of a plan waits for (ExactScheduler._by_startup)"""
        self.t = _tables(problem, startup_s)
        self.ps_cap = ps_cap(problem)
        self.budget = INF
        """Options whose own k * ET * price exceeds this cannot be in a cheaper plan."""
        self.thr_max = INF
        """No plan that could still beat the best is faster than this."""
        self.guard = False
        """Exact mode: also require every stage to meet TL when provisioned at TL."""
        self.caps = CapSolver(self)
        self.passes = self.levels = self.cap_levels = 0
        self.proven = True
        self.best: tuple[float, _Found] | None = None
        self.incumbent = bound
        """The least cost known: the best plan's, or `bound` (a plan found elsewhere, e.g. an
        earlier startup class) while that is less; plans costing as much are not wanted."""
        if bound < INF:
            self._set_budget(bound)
        self.stop_reason = ""

    def notes(self) -> dict:
        notes = {"mode": self.mode, "proven_optimal": self.proven, "dp_passes": self.passes,
                 "thetas_tried": self.levels, "cap_levels": self.cap_levels,
                 "cap_searches": self.caps.searches, "labels": self.caps.labels}
        if self.best is not None:
            cost, found = self.best
            notes.update(predicted_cost_usd=cost, predicted_throughput=found.throughput)
        return notes

    # -- the sweep ----------------------------------------------------------------------
    def run(self) -> Plan:
        self._check_runnable()
        if self.ps_cap < self.floor:
            raise NoFeasiblePlan(self._why_infeasible(self.ps_cap))
        fastest = self.thr_max = min(self._max_throughput(K_MAX), self.ps_cap)
        level = self.limit  # exact: theta; least: the floor mu (TL: both provision at TL)
        binv, thr_floor = self.binv_tl, self.floor
        found, lower = self._solve(binv, thr_floor, level)
        stale, check = False, 5
        while found is not None or lower < INF:
            self.levels += 1
            if found is not None:
                cost = self.cost(found)
                if not self.reachable(found):
                    # Every plan in this level's interval costs >= `cost`, a cost the
                    # reference cannot give this plan: only a cheaper one leaves a gap.
                    self.proven = self.proven and cost >= self.incumbent * (1 - 1e-12)
                elif cost < self.incumbent:
                    self.best, stale = (cost, found), True
                    self.incumbent = cost
                    self._set_budget(cost)
            if lower == INF or self.incumbent == INF:
                break
            # Every plan with f >= lower and throughput < reach costs >= the best.
            reach = self.reach(lower)
            if reach < self.thr_max and self.levels >= check:  # O(log) times: tighter bounds
                check = max(self.levels + 5, 1.5 * self.levels)
                if stale:
                    # exact: stages at the most units within the budget; least: the units
                    # are those at TL, so only options within the budget count
                    rule = K_BUDGET if self.mode == "exact" else K_LEAST
                    self.thr_max = min(self.thr_max, self._max_throughput(rule))
                    stale = False
                if self._per_sample_bound(binv, thr_floor) >= self.incumbent * (1 - 1e-12):
                    break
            if reach >= self.thr_max or level > self.ps_cap:
                break
            if self.mode == "exact":
                step = level if found is None else next_theta(
                    found.terms, found.ks, self.t.kmax[found.stages[2]], self.batch, self.t.par)
                level = max(step, reach / (1 + 2e-9), level * (1 + 1e-12))  # always onwards
                if not math.isfinite(level):
                    break
                binv, thr_floor = self.batch / level, -1.0
                found, lower = self._solve(binv, thr_floor, level)
            else:
                step = level if found is None else float(np.nextafter(found.throughput, INF))
                level = thr_floor = max(step, reach * (1 - 1e-12))
                found, lower = self._solve(binv, thr_floor, level)
        if self.best is None:
            raise NoFeasiblePlan(self.stop_reason or self._why_infeasible(fastest))
        return self._plan(self.best[1])

    def _set_budget(self, cost: float) -> None:
        """Options whose own share of the bill (kernels.option) reaches `cost` are left out."""
        self.budget = cost * 3600.0 * self.batch / self.problem.num_samples * (1 + 1e-12)

    def reach(self, lower: float) -> float:
        """Plans with f (USD per hour) >= lower and throughput below this cost at least the
        incumbent: cost >= f x billed hours of N / Thr (default model: (f + the fixed price)
        x billed hours of the startup + N / Thr).
        inf: every such plan does."""
        n = self.problem.num_samples
        if self.problem.cost_model != "default":
            return lower * n / 3600.0 / self.incumbent
        # every plan also pays the fixed price (job_cost adds it): f + fixed per hour
        lower = lower + fixed_price_per_hour(self.problem)
        if lower <= 0.0:  # free units: no bill excludes a plan
            return 0.0
        # the fewest seconds a plan of f = lower must be billed to cost the incumbent
        need_s = 3600.0 * self.incumbent / lower
        g = self.problem.unit_costs.billing_granularity_s
        if g > 0.0:
            # billed time is whole granules: more than (n0 - 1) granules bill n0, enough
            n0 = math.ceil(need_s / g)
            while lower * (n0 * g / 3600.0) < self.incumbent * (1 + 1e-12):
                n0 += 1
            need_s = (n0 - 1) * g
        run_s = (need_s - self.startup_s) * (1 - 1e-12)
        return n / run_s if run_s > 0.0 else INF

    def per_hour_bound(self) -> float:
        """Plans whose f (USD per hour) reaches this cost at least the incumbent (their
        throughput is at most thr_max)."""
        if self.incumbent == INF:
            return INF
        if self.problem.cost_model != "default":
            return self.incumbent * 3600.0 * self.thr_max / self.problem.num_samples
        run_s = self.problem.num_samples / self.thr_max + self.startup_s
        # the bill is (f + the fixed price) x hours (job_cost)
        fixed = fixed_price_per_hour(self.problem)
        return self.incumbent * 3600.0 / run_s - fixed if run_s > 0.0 else INF

    def cost(self, found: _Found) -> float:
        """USD of a plan as the reference costs it."""
        if self.problem.cost_model == "default":
            return job_cost(self.problem, found.per_hour, found.throughput, self.startup_s)
        return self.problem.num_samples / found.throughput / 3600.0 * found.per_hour

    def _solve(self, binv: float, thr_floor: float, level: float) -> tuple[_Found | None, float]:
        """(plan, lower) at one level: the cheapest plan there (caps respected) and a lower bound
        on f there. No plan and a finite lower: the level cannot beat the best (skipped);
        lower = inf: no plan at this level or any higher one."""
        h, found = self.dp(self.t.price, binv, thr_floor)
        if found is None:
            return None, INF
        if not self.broken_caps(found):
            return found, found.per_hour
        self.cap_levels += 1
        if self.beyond(found.per_hour, level):
            return None, found.per_hour
        return self.caps.solve(h, found, binv, thr_floor, level)

    # -- pieces shared with the capped search -------------------------------------------
    def dp(self, obj_price: np.ndarray, binv: float, thr_floor: float):
        """One DP pass at a level: (H, the best plan or None), prices `obj_price` in the sum."""
        t = self.t
        h, *tables = dp_pass(*t.dp_args(), obj_price, binv, K_LEAST, self.budget, thr_floor,
                             self.guard_binv, self.floor, SUM, self.allow_cuts, self.two_stages)
        self.passes += 1
        n, *stages = reconstruct(h, *tables, t.lvl, self.allow_cuts)
        if n == 0:
            return h, None
        found = self.found(n, stages, binv)
        if self.misses_limit(found):
            self.guard = True
            return self.dp(obj_price, binv, thr_floor)
        return h, found

    @property
    def guard_binv(self) -> float:
        return self.binv_tl if self.guard else -1.0

    def beyond(self, lower: float, level: float) -> bool:
        """Is every plan at this level (f >= lower) at least as dear as the best?"""
        return self.incumbent < INF and self.reach(lower) > level * (1 + 1e-6)

    def misses_limit(self, found: _Found) -> bool:
        """Exact mode: does a stage, provisioned at TL, fall short of TL (the reference then
        calls the whole plan infeasible)? Only a stage within the 1e-9 ceil tolerance of a
        unit count can; the sweep then excludes such options (the guard) and solves again."""
        if self.mode != "exact" or self.guard:
            return False
        t = self.t
        first, last, typ, nxt = found.stages
        ks, ets, _ = stage_values(len(typ), first, last, typ, nxt, t.oct_t, t.odt_t, t.aoct_t,
                                  t.ext, t.lvl, t.price, t.kmax, t.batch, t.par, t.mt,
                                  self.binv_tl)
        return bool(np.any(ks == 0) or np.any(self.batch / ets < self.floor))

    def reachable(self, found: _Found) -> bool:
        """Exact mode: does cost.evaluate_plan reach these units? It provisions at TL and at
        stage throughputs: at theta = Thr the units must come out the same. They do unless a
        stage with alpha = 0 is the bottleneck: its slack at theta = its own throughput is 0
        (up to rounding), and StageTerms.least_units calls a slack <= 0 unreachable although
        one unit meets theta exactly. The sweep never records such units."""
        if self.mode != "exact":
            return True
        t = self.t
        first, last, typ, nxt = found.stages
        for binv in (self.batch / found.throughput, self.binv_tl):
            ks, _, _ = stage_values(len(typ), first, last, typ, nxt, t.oct_t, t.odt_t,
                                    t.aoct_t, t.ext, t.lvl, t.price, t.kmax, t.batch, t.par,
                                    t.mt, binv)
            if np.array_equal(ks, found.ks):
                return True
        return False

    def found(self, n: int, stages: list, binv: float) -> _Found:
        t = self.t
        first, last, typ, nxt = (np.asarray(s[:n]) for s in stages)
        ks, ets, terms = stage_values(n, first, last, typ, nxt, t.oct_t, t.odt_t, t.aoct_t, t.ext,
                                      t.lvl, t.price, t.kmax, t.batch, t.par, t.mt, binv)
        per_hour = float(sum(self.problem.price_per_hour[j] * int(k) for j, k in zip(typ, ks)))
        throughput = min(min(self.batch / float(et) for et in ets), self.ps_cap)
        return _Found((first, last, typ, nxt), ks, ets, terms, per_hour, throughput)

    def units(self, found: _Found) -> np.ndarray:
        """Units per type the plan uses."""
        return np.bincount(found.stages[2], weights=found.ks, minlength=self.t.m)

    def broken_caps(self, found: _Found) -> set[int]:
        used = self.units(found)
        return {j for j, a in enumerate(self.problem.available) if a is not None and used[j] > a}

    def _max_throughput(self, k_rule: int) -> float:
        """Max over plans of the slowest stage's throughput (a max-min DP): K_MAX every stage
        at its unit bound; K_BUDGET at the most units it may have within the budget; K_LEAST
        at its units at TL, options over the budget left out (least mode's plans)."""
        h, *_ = dp_pass(*self.t.dp_args(), self.t.price, self.binv_tl, k_rule, self.budget,
                        -1.0, -1.0, -1.0, BOTTLENECK, self.allow_cuts, self.two_stages)
        self.passes += 1
        et = float(h[0].min())
        return self.batch / et if et > 0 else INF

    def _per_sample_bound(self, binv: float, thr_floor: float) -> float:
        """A lower bound on the cost of every plan at this level or above: a plan costs
        N/3600 * sum p k / Thr >= N/3600 * sum_g p_g k_g ET_g(k_g) / B, and p k ET(k) only
        grows with k (Amdahl), so its least value at this level's units bounds all higher."""
        h, *_ = dp_pass(*self.t.dp_args(), self.t.price, binv, K_LEAST, self.budget, thr_floor,
                        self.guard_binv, self.floor, PER_SAMPLE, self.allow_cuts,
                        self.two_stages)
        self.passes += 1
        return float(h[0].min()) * self.problem.num_samples / 3600.0 / self.batch

    def _plan(self, found: _Found) -> Plan:
        names, types = self.problem.layer_names, self.problem.type_names
        first, last, typ, _ = found.stages
        return Plan(stages=tuple(Stage(layers=tuple(names[a:b + 1]), resource=types[int(j)])
                                 for a, b, j in zip(first, last, typ)))

    def _check_runnable(self) -> None:
        for i, name in enumerate(self.problem.layer_names):
            if not self.t.run_t[:, i].any():
                zero = any(a == 0 for a in self.problem.available)
                raise NoFeasiblePlan(f"layer {name} cannot run on any resource type"
                                     + (" with units available" if zero else ""))

    def _why_infeasible(self, fastest: float) -> str:
        if self.ps_cap < self.floor:
            return (f"no plan reaches {self.limit:.6g} samples/s: the parameter server's shared "
                    f"bandwidth carries at most {self.ps_cap:.6g} samples/s of embedding traffic")
        if fastest < self.floor:
            return (f"no plan reaches {self.limit:.6g} samples/s: the fastest possible is "
                    f"{fastest:.6g} samples/s (every stage at its unit bound: the type's "
                    f"availability or {MAX_REPLICAS})")
        return (f"no plan reaches {self.limit:.6g} samples/s: the fastest possible, "
                f"{fastest:.6g} samples/s, meets it only within the cost model's rounding "
                "tolerance")


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
    mt: tuple
    """the default model's arrays as kernels.stage_dm reads them (flag 0: the paper's)"""

    @property
    def m(self) -> int:
        return self.oct_t.shape[0]

    def dp_args(self) -> tuple:
        return (self.oct_t, self.odt_t, self.aoct_t, self.run_t, self.ext, self.lvl, self.order,
                self.price, self.kmax, self.batch, self.par, self.mt)


def _tables(problem: Problem, startup_s: float = 0.0) -> _Tables:
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
    ext = bnd[:, None] / lev[None, :] + boundary_latency_s(problem)  # as stage_terms adds it
    return _Tables(
        oct_t=cols(problem.oct_s), odt_t=cols(problem.odt_s),
        aoct_t=cols(problem.alpha * problem.oct_s), run_t=np.ascontiguousarray(run.T),
        ext=np.ascontiguousarray(ext), lvl=lvl, order=order,
        price=np.asarray(problem.price_per_hour, np.float64), kmax=kmax,
        batch=float(problem.batch_size), par=bool(problem.odt_parallel), mt=_model_tuple(problem, startup_s))


def _model_tuple(problem: Problem, startup_s: float = 0.0) -> tuple:
    """kernels.stage_dm's view of the default model (same types for both models, so the
    kernels compile once); its last entry W = startup_s x B / N, the startup every unit is
    billed for, in seconds per batch (kernels._option_default)."""
    a = model_arrays(problem)
    return (1 if problem.cost_model == "default" else 0, a.step_oh, a.layer_oh, a.net,
            a.capacity, a.cum_param, a.cum_state, a.cum_act, float(a.lat2_s),
            float(problem.batch_size), int(a.k_batch),
            float(startup_s) * float(problem.batch_size) / float(problem.num_samples))
