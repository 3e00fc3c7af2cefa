"""Repair a plan the simulator finds short: grow its stages until the simulator's throughput
meets the limit.

While the simulated throughput misses the limit, and within a bound (the check's
`max_resimulations` simulations and `max_events` SimPy events, deterministic unlike a time
limit): the stage whose replicas the simulator finds busiest per step (the bottleneck) gets
more units, as many as the analytic model says bring its busy time to the share of the step
the limit allows (the simulator's overhead beyond the analytic stage time held fixed), at
most twice its units (the overhead, e.g. the all-reduce, grows with them) and within the
type's availability cap; then the plan is simulated again. A growth that does not raise the
simulated throughput is undone (a jump of several units is retried one unit at a time; a
single unit that does not help marks the stage as gaining nothing). When every stage fits
the step yet the step is too long (fill, drain, waits), one unit more is tried on each stage
and on all at once. It stops with `impossible` when the bottleneck stage cannot grow (cap
reached, or more units do not shorten its step) while its busy time alone exceeds the time a
step may take (no provisioning of this plan can meet the limit), or when no stage can grow at
all; with `unresolved` when the bound is reached first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from heterps_sim.core.limits import MAX_REPLICAS
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult

MAX_UNITS = MAX_REPLICAS
"""A stage never grows past this many units (the cost model's own bound, core.limits)."""
Evaluate = Callable[[Plan], RunResult]


@dataclass(frozen=True, slots=True, kw_only=True)
class Growth:
    """One re-provisioning step: stage `stage` from `units_before` to `units_after` units."""

    stage: int
    resource: str
    """The stage's type (types of a mixed stage, joined by '+')."""
    units_before: int
    units_after: int
    busy_before_s: float
    """The stage's simulated busy seconds per replica per step before the growth."""
    throughput_before: float
    throughput_after: float
    cost_usd_after: float
    kept: bool
    """False: it did not raise the simulated throughput and was undone."""



class Reprovision:
    """The re-provisioning loop (module docstring), one growth per simulation."""

    def __init__(self, problem: Problem, evaluate: Evaluate, run: Callable[[Plan], RunResult],
                 plan: Plan, sim: RunResult, settings):
        self.problem, self.evaluate, self.run_one = problem, evaluate, run
        self.plan, self.sim, self.settings = plan, sim, settings
        self.events = 0
        self.growths: list[Growth] = []
        self.simulations = 0
        self.single_steps: set[int] = set()
        """Stages whose last jump gained nothing: they grow one unit at a time."""
        self.no_gain: set[int] = set()
        """Stages where one unit more did not raise the simulated throughput."""

    @property
    def spent(self) -> bool:
        """The re-simulation bound is reached (count or events)."""
        return (self.simulations >= self.settings.max_resimulations
                or self.events >= self.settings.max_events)

    def simulate(self, plan: Plan) -> RunResult:
        sim = self.run_one(plan)
        self.simulations += 1
        self.events += int(sim.extra.get("events", 0))
        return sim

    def run(self) -> tuple[str, str]:
        p = self.problem
        allowed = p.batch_size / p.throughput_limit  # the longest a step may take
        while not self.sim.feasible:
            if self.spent:
                return "unresolved", (
                    f"still {self._shortfall()} after {self.simulations} re-simulations "
                    f"({self.events:,} events; the bound); a plan with more units may meet it")
            busy = [s.exec_time_s for s in self.sim.stages]
            top = max(range(len(busy)), key=lambda g: busy[g])
            if busy[top] > allowed * (1 + 1e-9):  # this stage alone is too slow: grow it
                spare = 0 if top in self.no_gain else _spare_units(p, self.plan, top)
                if spare == 0:
                    return "impossible", self._too_busy(top, busy[top], allowed)
                self._grow(top, self._target_units(top, spare))
            elif not any(_spare_units(p, self.plan, g) for g in range(len(busy))):
                return "impossible", (
                    f"no provisioning of this plan meets the limit: every stage's type has all "
                    f"its available units in use, and the plan stays at {self._shortfall()}")
            elif self._best_single_unit() or self._one_more_everywhere():
                continue
            elif not self.spent:  # (at the bound: said at the loop's top)
                return "unresolved", (
                    f"every stage fits the {allowed * 1e3:.4g} ms a step may take, but the "
                    f"step is longer (pipeline fill and drain, waiting on transfers) and "
                    f"neither one unit more on any stage nor on all of them shortens it; the "
                    f"plan stays at {self._shortfall()}; more microbatches or another plan "
                    f"may meet it")
        return ("reprovisioned", "") if self.growths else ("confirmed", "")

    def _too_busy(self, g: int, busy: float, allowed: float) -> str:
        stage = self.plan.stages[g]
        why = (f"one unit more on it ({stage.num_replicas + 1}) does not raise the simulated "
               "throughput" if g in self.no_gain else f"{stage.label} is at its availability cap")
        return (f"no provisioning of this plan meets the limit: stage {g} ({_span(stage)} on "
                f"{stage.label}) is busy {busy * 1e3:.4g} ms per step in the simulator, above "
                f"the {allowed * 1e3:.4g} ms a step may take at "
                f"{self.problem.throughput_limit:,.0f} samples/s, and {why}")

    def _shortfall(self) -> str:
        lim = self.problem.throughput_limit
        return (f"{self.sim.throughput:,.0f} samples/s in the simulator, "
                f"{100 * (1 - self.sim.throughput / lim):.1f}% below the limit {lim:,.0f}")

    def _best_single_unit(self) -> bool:
        """Every stage fits the step, yet the step is too long (fill and drain, waits): which
        stage shortens it is not in the per-stage statistics, so try one unit more on each
        stage that can grow (busiest first) and keep the one that raises the throughput most
        per USD/h; False when none raises it."""
        busy = [s.exec_time_s for s in self.sim.stages]
        best = None
        for g in sorted(range(len(busy)), key=lambda g: -busy[g]):
            if self.spent:
                break
            if _spare_units(self.problem, self.plan, g) == 0:
                continue
            k = self.plan.stages[g].num_replicas
            plan, sim = self._try(g, k + 1)
            price = self.problem.price_per_hour[self.problem.type_index(
                self.plan.stages[g].resource)]
            gain = (sim.throughput - self.sim.throughput) / price
            if sim.throughput > self.sim.throughput * (1 + 1e-9) and (
                    best is None or gain > best[0]):
                best = (gain, len(self.growths) - 1, plan, sim)
        if best is None:
            return False
        _, n, self.plan, self.sim = best
        self.growths[n] = replace(self.growths[n], kept=True)
        return True

    def _target_units(self, g: int, spare: int) -> int:
        """Units for stage g: the fewest whose analytic stage time plus the simulator's
        overhead fits the busy time the limit allows (galloping, then bisection)."""
        k = self.plan.stages[g].num_replicas
        k_max = min(k + spare, 2 * k, MAX_UNITS)  # at most double: the overhead grows with k
        if g in self.single_steps:
            return k + 1
        busy = self.sim.stages[g].exec_time_s
        target = busy * self.sim.throughput / self.problem.throughput_limit
        overhead = busy - self._stage_time(g, k)

        def need(kk: int) -> float:
            return self._stage_time(g, kk) + overhead

        prev, prev_t, step = k, busy, 1
        while True:
            kk = min(k + step, k_max)
            t = need(kk)
            if t <= target:
                lo, hi = prev, kk  # need(lo) > target >= need(hi); falling in between
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (mid, hi) if need(mid) > target else (lo, mid)
                return hi
            if t >= prev_t or kk == k_max:  # rising (e.g. all-reduce) or capped: stop here
                return prev if prev > k else kk
            prev, prev_t, step = kk, t, step * 2

    def _stage_time(self, g: int, k: int) -> float:
        return self.evaluate(with_units(self.problem, self.plan, g, k)).stages[g].exec_time_s

    def _one_more_everywhere(self) -> bool:
        """One unit more on every stage that can grow, at once (the pipeline's rounds may
        need it: a lone unit more can leave the microbatches as unevenly spread)."""
        grow = [g for g in range(len(self.plan.stages))
                if _spare_units(self.problem, with_units(self.problem, self.plan, g,
                                                         self.plan.stages[g].num_replicas), g)]
        if len(grow) < 2 or self.spent:
            return False
        plan = self.plan
        for g in grow:
            if _spare_units(self.problem, plan, g) == 0:
                return False
            plan = with_units(self.problem, plan, g, plan.stages[g].num_replicas + 1)
        sim = self.simulate(plan)
        kept = sim.throughput > self.sim.throughput * (1 + 1e-9)
        for g in grow:
            stage = self.plan.stages[g]
            self.growths.append(Growth(
                stage=g, resource="+".join(t for t, _ in stage.groups),
                units_before=stage.num_replicas, units_after=stage.num_replicas + 1,
                busy_before_s=self.sim.stages[g].exec_time_s,
                throughput_before=self.sim.throughput, throughput_after=sim.throughput,
                cost_usd_after=sim.cost_usd, kept=kept))
        if kept:
            self.plan, self.sim = plan, sim
        return kept

    def _try(self, g: int, k_new: int) -> tuple[Plan, RunResult]:
        """Simulate stage g at k_new units; recorded as a growth, not (yet) kept."""
        stage = self.plan.stages[g]
        plan = with_units(self.problem, self.plan, g, k_new)
        sim = self.simulate(plan)
        self.growths.append(Growth(
            stage=g, resource="+".join(t for t, _ in stage.groups),
            units_before=stage.num_replicas, units_after=k_new,
            busy_before_s=self.sim.stages[g].exec_time_s,
            throughput_before=self.sim.throughput, throughput_after=sim.throughput,
            cost_usd_after=sim.cost_usd, kept=False))
        return plan, sim

    def _grow(self, g: int, k_new: int) -> None:
        """Grow the bottleneck stage g; keep it if the throughput rose, else remember why."""
        k = self.plan.stages[g].num_replicas
        plan, sim = self._try(g, k_new)
        if sim.throughput > self.sim.throughput * (1 + 1e-9):
            self.growths[-1] = replace(self.growths[-1], kept=True)
            self.plan, self.sim = plan, sim
        elif k_new - k > 1:
            self.single_steps.add(g)
        else:
            self.no_gain.add(g)


def _span(stage: Stage) -> str:
    return stage.layers[0] if len(stage.layers) == 1 else f"{stage.layers[0]}..{stage.layers[-1]}"


def _spare_units(problem: Problem, plan: Plan, g: int) -> int:
    """Units stage g can still add: the free units of its types under the caps."""
    used: dict[str, int] = {}
    for s in plan.stages:
        for t, n in s.groups:
            used[t] = used.get(t, 0) + n
    spare = 0
    for t, _ in plan.stages[g].groups:
        cap = problem.available[problem.type_index(t)]
        spare += (MAX_UNITS if cap is None else max(cap - used[t], 0))
    return min(spare, MAX_UNITS - plan.stages[g].num_replicas)


def with_units(problem: Problem, plan: Plan, g: int, k: int) -> Plan:
    """The plan with stage g at k >= its current units; a mixed stage adds them to its types
    in order, each up to its cap."""
    stages = list(plan.stages)
    s = stages[g]
    if not s.is_mixed:
        stages[g] = Stage(layers=s.layers, resource=s.resource, num_replicas=k)
    else:
        extra, groups = k - s.num_replicas, []
        for t, n in s.replicas:
            cap = problem.available[problem.type_index(t)]
            used = sum(m for st in plan.stages for tt, m in st.groups if tt == t)
            add = min(extra, MAX_UNITS if cap is None else max(cap - used, 0))
            groups.append((t, n + add))
            extra -= add
        stages[g] = Stage(layers=s.layers, replicas=tuple(groups))
    return Plan(stages=tuple(stages), num_microbatches=plan.num_microbatches,
                schedule=plan.schedule)


