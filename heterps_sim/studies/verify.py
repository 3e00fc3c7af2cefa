"""Check a scheduled plan with the simulator, and re-provision it where the simulator finds it short.

    check = verify_plan(problem, plan, analytic, evaluate)                  # `schedule`
    check = verify_plan(problem, plan, analytic, evaluate, reprovision=True)  # `simulate`
    check.simulated      RunResult(source="des") of the scheduled plan
    check.final_plan     the plan to run: the scheduled one, or the re-provisioned one
    check.status         confirmed | missed | reprovisioned | impossible | unresolved | not_run

The analytic model assumes a steady pipeline; the simulator runs the plan with the
deterministic effects on (`DETERMINISTIC_EFFECTS`: bubbles, all-reduce, transfers, contention,
the parameter server; no jitter, stragglers or preemption, so the seed changes nothing) under
the plan's own schedule and microbatch count.

Re-planning (`reprovision=True` with a `replan` callable), first: where the problem uses the
default cost model and the check a flushed schedule, the cheapest plan whose flushed closed
form meets the limit over several microbatch counts (studies/replan_flushed.py, exact, each
within `exact_max_labels` labels) is simulated, and run if it meets the limit. Otherwise
(studies/replan.py) the scenario's scheduler runs again with its throughput floor raised by the shortfall the flushed
closed form (cost/flush.py) predicts, at most `max_replan_rounds` times; the first re-planned
plan the simulator finds meeting the real limit is the one to run (`replanned`). Otherwise the
re-planned plan closest to the limit (or the checked plan, if closer) is re-provisioned.

Re-provisioning (`reprovision=True`), while the simulated throughput misses the limit and
within a bound (`max_resimulations` simulations, `max_events` SimPy events): the stage whose replicas the simulator finds busiest per step
(its per-stage busy time, the bottleneck) gets more units, as many as the analytic model says
bring its busy time to the share of the step the limit allows (the simulator's overhead
beyond the analytic stage time held fixed), at most twice its units (the overhead, e.g. the
all-reduce, grows with them) and within the type's availability cap; then the
plan is simulated again. A growth that does not raise the simulated throughput is undone
(a jump of several units is retried one unit at a time; a single unit that does not help
marks the stage as gaining nothing). It stops with `impossible` when the bottleneck stage
cannot grow (cap reached, or more units do not shorten its step) while its busy time alone
exceeds the time a step may take (batch / limit: no provisioning of this plan can meet the
limit), or when no stage can grow at all; with `unresolved` when the bound is reached first.
Only the analytic evaluator (a callable) and `des.simulate` are used, so any cost model or
simulator physics behind them is checked as it is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from heterps_sim.core.limits import MAX_REPLICAS
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.des import DesOptions, simulate
from heterps_sim.des.options import EFFECTS, VARIABILITY
from heterps_sim.studies import replan_flushed
from heterps_sim.studies.replan import (
    MAX_ROUNDS,
    Replan,
    ReplanRound,
    flushed_or_none,
)

DETERMINISTIC_EFFECTS: tuple[str, ...] = tuple(e for e in EFFECTS if e not in VARIABILITY)
"""The effects a check switches on: every cluster effect that does not draw from the seed."""
ENGINES = ("des", "none")
"""`--verify` values: check with the simulator, or not at all."""
MAX_UNITS = MAX_REPLICAS
"""A stage never grows past this many units (the cost model's own bound, core.limits)."""

Evaluate = Callable[[Plan], RunResult]
"""The analytic model for one plan (its replica counts fixed), as the scheduler used it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifySettings:
    effects: tuple[str, ...] = DETERMINISTIC_EFFECTS
    seed: int = 0
    num_steps: int | None = 4
    """Simulated steps (the first is warm-up); None = DesOptions' default. With the bubbles
    effect every step flushes, so 4 steps give the 8-step throughput within 0.3% on the
    64-type scenarios at half the time."""
    max_resimulations: int = 24
    """Re-provisioning simulates the plan at most this many more times..."""
    max_events: int = 400_000
    """... and stops starting new simulations once they have processed this many SimPy
    events in all: deterministic, unlike a time limit; with contention and the PS on, the
    simulator runs ~200,000 events/s on the 2-core VM (measured under load), so about 2 s."""
    max_replan_rounds: int = MAX_ROUNDS
    """Re-planning runs the scheduler at most this many times (studies/replan.py)."""
    exact_max_labels: int = replan_flushed.MAX_LABELS
    """Re-planning first tries the exact optimum of the flushed closed form
    (studies/replan_flushed.py) with at most this many labels; 0: not at all."""

    def options(self) -> DesOptions:
        """The simulator's options: these effects, the plan's schedule and microbatches."""
        fields = {} if self.num_steps is None else {"num_steps": self.num_steps}
        return DesOptions.with_effects(self.effects, **fields)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Verification:
    status: str
    reason: str
    settings: VerifySettings
    analytic: RunResult
    """The analytic result of the checked plan."""
    simulated: RunResult
    """The simulator's result of the checked plan."""
    final_plan: Plan
    """The checked plan with its replica counts fixed, or the re-provisioned plan."""
    final_analytic: RunResult
    final_simulated: RunResult
    growths: tuple[Growth, ...] = ()
    rounds: tuple[ReplanRound, ...] = ()
    """The re-planning rounds (studies/replan.py), if any ran."""
    replanned_plan: Plan | None = None
    """The re-planned plan the final plan comes from (itself, or re-provisioned)."""
    replanned_simulated: RunResult | None = None
    replan_method: str | None = None
    """How the re-planned plan was found: ReplanRound.method of its round."""
    replan_proven_cheapest: bool = False
    """exact-flushed: the re-planned plan is the cheapest under the flushed form over every
    microbatch count searched (its rounds)."""
    wall_s: float = 0.0
    simulations: int = 1
    extra: dict = field(default_factory=dict)

    @property
    def meets_limit(self) -> bool:
        return bool(self.final_simulated.feasible)

    @property
    def replanned(self) -> bool:
        return self.replanned_plan is not None

    @property
    def reprovisioned(self) -> bool:
        return any(g.kept for g in self.growths)

    def to_json_dict(self) -> dict:
        from dataclasses import asdict
        s = self.settings
        out = {"engine": "des", "status": self.status, "meets_limit": self.meets_limit,
               "reason": self.reason, "effects": list(s.effects), "seed": s.seed,
               "schedule": self.simulated.extra.get("schedule"),
               "num_microbatches": self.simulated.extra.get("num_microbatches"),
               "num_steps": self.simulated.extra.get("num_steps"),
               "wall_s": self.wall_s, "simulations": self.simulations,
               "analytic": summary(self.analytic),
               "simulated": summary(self.simulated, self.extra.get("simulated_cost_usd")),
               "simulated_vs_analytic_pct": gap_pct(self.simulated, self.analytic),
               "flushed": ({"throughput": self.extra["flushed_throughput"],
                            "cost_usd": self.extra["flushed_cost_usd"]}
                           if "flushed_throughput" in self.extra else None),
               "replan_rounds": [asdict(r) for r in self.rounds],
               "steps": [asdict(g) for g in self.growths],
               "simulated_result": self.simulated.to_json_dict()}
        if self.replanned:
            out["replanned"] = {"plan": self.replanned_plan.to_json_dict(),
                                "simulated_result": self.replanned_simulated.to_json_dict(),
                                "method": self.replan_method,
                                "proven_cheapest": self.replan_proven_cheapest}
        if self.reprovisioned or self.status == "replanned":  # the plan to run instead
            out["final"] = {"plan": self.final_plan.to_json_dict(),
                            "analytic": summary(self.final_analytic),
                            "simulated": summary(self.final_simulated,
                                                 self.extra.get("final_simulated_cost_usd")),
                            "simulated_result": self.final_simulated.to_json_dict()}
            if self.reprovisioned:
                out["reprovisioned"] = out["final"]
        return out


def job_cost_usd(problem: Problem, plan: Plan, result: RunResult) -> float:
    """What the cost model charges for the job at `result`'s throughput: the simulator's own
    cost_usd is hours x USD/h; the default model also bills startup and whole billing
    periods (cost.reference.job_cost), so a simulated run is priced the same way."""
    from heterps_sim.cost import reference as model
    if (getattr(problem, "cost_model", "paper") != "default" or not hasattr(model, "job_cost")
            or not math.isfinite(result.cost_usd) or result.throughput <= 0):
        return result.cost_usd
    startup = model.plan_startup_s(problem, model.plan_stages(problem, plan))
    return float(model.job_cost(problem, result.cost_per_hour, result.throughput, startup))


def summary(result: RunResult, cost_usd: float | None = None) -> dict:
    """The numbers a check compares: throughput, cost (`cost_usd` replaces the result's),
    feasibility, units."""
    cost = result.cost_usd if cost_usd is None else cost_usd
    return {"feasible": result.feasible, "throughput": result.throughput,
            "cost_usd": cost if math.isfinite(cost) else None,
            "cost_per_hour": result.cost_per_hour, "step_time_s":
            result.step_time_s if math.isfinite(result.step_time_s) else None,
            "units": [s.num_replicas for s in result.stages],
            "bottleneck_stage": result.bottleneck_stage, "reason": result.reason}


def gap_pct(result: RunResult, reference: RunResult) -> float | None:
    """100 x (result / reference - 1) of the throughputs."""
    if reference.throughput <= 0 or not math.isfinite(reference.throughput):
        return None
    return 100.0 * (result.throughput / reference.throughput - 1.0)


def fixed_plan(plan: Plan, analytic: RunResult) -> Plan:
    """The plan with every stage's units as the analytic model provisioned them."""
    return plan.with_replicas([s.num_replicas for s in analytic.stages])


def verify_plan(problem: Problem, plan: Plan, analytic: RunResult, evaluate: Evaluate,
                settings: VerifySettings | None = None, *,
                reprovision: bool = False, replan: Replan | None = None) -> Verification:
    """Simulate `plan` (provisioned as `analytic` says) with the deterministic effects on;
    with `reprovision`, re-plan it (when `replan`, the scheduler that chose it, is given) and
    grow it until the simulator's throughput meets the limit (module docstring). `evaluate` is
    the analytic model the plan was scheduled with."""
    check = _verify(problem, plan, analytic, evaluate, settings or VerifySettings(), reprovision,
                    replan)
    costs = {"simulated_cost_usd": job_cost_usd(problem, fixed_plan(plan, analytic),
                                                check.simulated),
             "final_simulated_cost_usd": job_cost_usd(problem, check.final_plan,
                                                      check.final_simulated),
             **flushed_prediction(problem, fixed_plan(plan, analytic), check)}
    if check.replanned:
        costs["replanned_simulated_cost_usd"] = job_cost_usd(problem, check.replanned_plan,
                                                             check.replanned_simulated)
    return replace(check, extra={**check.extra, **costs})


def flushed_prediction(problem: Problem, plan: Plan, check: Verification) -> dict:
    """The analytic step time of the checked plan under its flushed schedule (cost/flush.py),
    at the simulator's m, with the effects the check switched on: {} when the plan did not
    run, or runs unflushed (async, or no bubbles effect)."""
    thr = flushed_or_none(problem, plan, check.simulated, check.settings.effects)
    if thr is None or check.analytic.cost_per_hour <= 0:
        return {}
    usd = job_cost_usd(problem, plan, replace(check.analytic, throughput=thr, cost_usd=(
        problem.num_samples / thr / 3600.0 * check.analytic.cost_per_hour)))
    return {"flushed_throughput": thr, "flushed_cost_usd": usd}


def _verify(problem: Problem, plan: Plan, analytic: RunResult, evaluate: Evaluate,
            settings: VerifySettings, reprovision: bool,
            replan: Replan | None = None) -> Verification:
    options = settings.options()
    start = time.perf_counter()
    plan = fixed_plan(plan, analytic)

    def run(p: Plan) -> RunResult:
        return simulate(problem, p, seed=settings.seed, options=options,
                        record_spans=False).result

    first = run(plan)
    done = dict(settings=settings, analytic=analytic, simulated=first)
    if not first.extra.get("simulated", True):  # the simulator could not run the plan
        return Verification(status="not_run", reason=first.reason, final_plan=plan,
                            final_analytic=analytic, final_simulated=first,
                            wall_s=time.perf_counter() - start, **done)
    if first.feasible:
        return Verification(status="confirmed", reason="", final_plan=plan,
                            final_analytic=analytic, final_simulated=first,
                            wall_s=time.perf_counter() - start, **done)
    if not reprovision:
        return Verification(status="missed", reason=first.reason, final_plan=plan,
                            final_analytic=analytic, final_simulated=first,
                            wall_s=time.perf_counter() - start, **done)
    base, base_sim, rounds, sims, from_replan = plan, first, (), 0, {}
    if replan is not None and (settings.max_replan_rounds > 0 or settings.exact_max_labels > 0):
        got = replan_flushed.replan(
            problem, plan, first, replan, evaluate, run, settings.effects,
            lambda p, r: job_cost_usd(problem, p, r), max_rounds=settings.max_replan_rounds,
            max_labels=settings.exact_max_labels, lower_bound=analytic.cost_usd)
        rounds, sims = got.rounds, len({(r.method, r.units) for r in got.rounds if r.found})
        if got.accepted:
            return Verification(status="replanned", reason="", final_plan=got.plan,
                                final_analytic=got.analytic, final_simulated=got.simulated,
                                rounds=rounds, replanned_plan=got.plan,
                                replanned_simulated=got.simulated, replan_method=got.method,
                                replan_proven_cheapest=got.proven_cheapest,
                                simulations=1 + sims,
                                wall_s=time.perf_counter() - start, **done)
        if got.plan is not None and got.simulated.throughput > first.throughput:
            base, base_sim = got.plan, got.simulated  # re-provision the closest plan
            from_replan = dict(replanned_plan=got.plan, replanned_simulated=got.simulated,
                               replan_method=got.method)
    search = _Search(problem, evaluate, run, base, base_sim, settings)
    status, reason = search.run()
    final_plan, final_sim = search.plan, search.sim
    return Verification(status=status, reason=reason, final_plan=final_plan,
                        final_analytic=evaluate(final_plan), final_simulated=final_sim,
                        growths=tuple(search.growths), rounds=rounds,
                        simulations=1 + sims + search.simulations,
                        wall_s=time.perf_counter() - start, **from_replan, **done)


class _Search:
    """The re-provisioning loop (module docstring), one growth per simulation."""

    def __init__(self, problem: Problem, evaluate: Evaluate, run: Callable[[Plan], RunResult],
                 plan: Plan, sim: RunResult, settings: VerifySettings):
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


VERDICTS = {
    "confirmed": "simulator: FEASIBLE, the plan meets the limit",
    "replanned": "simulator: FEASIBLE after re-planning",
    "reprovisioned": "simulator: FEASIBLE after re-provisioning",
    "missed": "simulator: MISSES the limit (heterps-sim simulate re-provisions the plan)",
    "impossible": "simulator: MISSES the limit",
    "unresolved": "simulator: MISSES the limit",
    "not_run": "simulator: could not run the plan",
}


def check_lines(check: Verification) -> list[str]:
    """The check as the commands print it: analytic beside simulated (and re-provisioned)
    throughput and cost, the re-provisioning steps, the verdict."""
    sim, lim = check.simulated, check.analytic.throughput_limit
    lines = [f"simulator check ({', '.join(check.settings.effects) or 'no effects'}; "
             f"{sim.extra.get('schedule', '?')}, {sim.extra.get('num_microbatches', '?')} "
             f"microbatches, {sim.extra.get('num_steps', '?')} steps, seed {check.settings.seed}): "
             f"{check.simulations} simulation{'s' if check.simulations != 1 else ''}, "
             f"{check.wall_s:.2f} s",
             f"  {'':15}{'samples/s':>13} {'vs limit':>9} {'cost USD':>12}  units per stage"]
    rows = [("analytic", check.analytic, check.analytic.cost_usd)]
    if "flushed_throughput" in check.extra:  # the closed form of the flushed schedule
        rows.append(("  flushed", replace(check.analytic,
                                          throughput=check.extra["flushed_throughput"]),
                     check.extra["flushed_cost_usd"]))
    rows.append(("simulated", sim, check.extra.get("simulated_cost_usd", sim.cost_usd)))
    if check.replanned:
        rows.append(("re-planned", check.replanned_simulated,
                     check.extra.get("replanned_simulated_cost_usd",
                                     check.replanned_simulated.cost_usd)))
    if check.reprovisioned:
        rows.append(("re-provisioned", check.final_simulated,
                     check.extra.get("final_simulated_cost_usd", check.final_simulated.cost_usd)))
    for label, r, usd in rows:
        vs = f"{100 * (r.throughput / lim - 1):+.1f}%" if lim > 0 else ""
        cost = f"{usd:,.6g}" if math.isfinite(usd) else "-"
        units = "-".join(str(s.num_replicas) for s in r.stages)
        lines.append(f"  {label:15}{r.throughput:>13,.0f} {vs:>9} {cost:>12}  {units}")
    lines.extend(replan_flushed.any_round_line(r) for r in check.rounds)
    kept = [g for g in check.growths if g.kept]
    for n, g in enumerate(kept, 1):
        lines.append(f"  step {n}: stage {g.stage} ({g.resource}) "
                     f"{g.units_before} -> {g.units_after} units: "
                     f"{g.throughput_before:,.0f} -> {g.throughput_after:,.0f} samples/s")
    if len(kept) < len(check.growths):
        lines.append(f"  ({len(check.growths) - len(kept)} other tries undone: they did not "
                     "raise the simulated throughput; verify.json lists them)")
    verdict = VERDICTS[check.status]
    if check.status == "replanned" and check.replan_method == replan_flushed.EXACT:
        ms = next((r.microbatches_searched for r in check.rounds
                   if r.method == replan_flushed.EXACT), ())
        verdict += (f" (exact under the flushed form: the cheapest plan that meets the limit "
                    f"at m = {replan_flushed.ms_text(ms)})" if check.replan_proven_cheapest else
                    " (exact under the flushed form at "
                    f"{check.final_simulated.extra.get('num_microbatches')} microbatches)")
    lines.append(verdict + (f": {check.reason}" if check.reason and check.status in
                            ("impossible", "unresolved", "not_run") else ""))
    return lines
