"""How a plan is priced: one typed `Pricing` (cost model, schedule, provisioning, microbatch
policy) and its one `price(problem, plan)`.

Every command, study and caller prices through here, so one plan has one price everywhere:

    pricing = Pricing.of(problem)                    # the problem's model, gpipe, m searched
    plan, result = pricing.price(problem, plan)      # provisioned as it runs, and its RunResult

What each pricing means:

    default model, gpipe | 1f1b    the flushed closed form (cost/flush.py): every step fills
                                   and drains the pipeline. A stage without units gets the
                                   cheapest units, and a plan without m the cheapest m
                                   (2..MAX_MICROBATCHES, or the scenario's), for its cuts and
                                   types (schedulers/exact/flushed_provision: exact).
    default model, async           the steady-pipeline stage model (cost/reference.py): a
                                   pipeline that never flushes is paced by its slowest stage;
                                   a plan of staleness 0 (one stage, m >= its units) trains
                                   synchronously and is priced as it flushes.
    paper model                    HeterPS's Amdahl stage model, as the paper defines it.

`provisioning` ("least" | "exact") is the stage model's rule for units (least: each stage's
fewest units at the limit; exact: the cheapest bottleneck level); under the flushed form the
units and m are always the cheapest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.cost.flush import FLUSHED, flushed_throughput
from heterps_sim.cost.reference import (
    MODES,
    billing_extra,
    evaluate_plan,
    job_cost,
    plan_stages,
    plan_startup_s,
)

SCHEDULES = ("gpipe", "1f1b", "async")
MAX_MICROBATCHES = 64
"""Microbatch counts searched when neither the plan nor the scenario sets m: 2..this."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pricing:
    """The one description of how plans are priced (module docstring)."""

    model: str = "default"
    """The analytic cost model: "default" (all-reduce, fixed costs, memory, PS, startup and
    billing) or "paper" (HeterPS's Amdahl model). It must be the problem's."""
    schedule: str = "gpipe"
    """The pipeline schedule plans run with: gpipe and 1f1b flush every step, async never."""
    provisioning: str = "least"
    """The stage model's unit rule (least | exact); the flushed form takes the cheapest."""
    microbatches: int | None = None
    """m for every plan; None: the scenario's costs.num_microbatches when > 1, else searched
    (flushed form) or the simulator's default for the plan's units (stage model)."""
    max_microbatches: int = MAX_MICROBATCHES
    """The largest m searched when m is open."""

    def __post_init__(self) -> None:
        if self.model not in ("default", "paper"):
            raise ValueError(f"pricing model must be default or paper, got {self.model!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"pricing schedule must be one of {SCHEDULES}, got "
                             f"{self.schedule!r}")
        if self.provisioning not in MODES:
            raise ValueError(f"pricing provisioning must be one of {MODES}, got "
                             f"{self.provisioning!r}")
        if self.microbatches is not None and self.microbatches < 1:
            raise ValueError("pricing microbatches must be >= 1")
        if self.max_microbatches < 2:
            raise ValueError("pricing max_microbatches must be >= 2")

    @classmethod
    def of(cls, problem: Problem, *, schedule: str = "gpipe", provisioning: str = "least",
           microbatches: int | None = None) -> Pricing:
        """The pricing of `problem`: its cost model, its scenario's m when it sets one."""
        chosen = problem.unit_costs.num_microbatches
        return cls(model=problem.cost_model, schedule=schedule, provisioning=provisioning,
                   microbatches=microbatches if microbatches is not None
                   else (chosen if chosen > 1 else None))

    # ---- what it is ----------------------------------------------------------------------
    @property
    def flushed(self) -> bool:
        """Plans are priced by the flushed closed form (default model, gpipe or 1f1b)."""
        return self.model == "default" and self.schedule in FLUSHED

    @property
    def objective(self) -> str:
        """"flushed" or "stage": which closed form the exact search optimises."""
        return "flushed" if self.flushed else "stage"

    def microbatch_counts(self, problem: Problem) -> list[int]:
        """The m's a plan without one is searched over (flushed form), within the batch."""
        if self.microbatches is not None:
            return [self.microbatches] if self.microbatches <= problem.batch_size else []
        return [m for m in range(2, self.max_microbatches + 1) if m <= problem.batch_size]

    def describe(self) -> str:
        """One line for the commands: 'flushed closed form (gpipe, m = 2-64)'."""
        if self.flushed:
            ms = (f"m = {self.microbatches}" if self.microbatches is not None
                  else f"m = 2-{self.max_microbatches}")
            return f"flushed closed form ({self.schedule}, {ms})"
        model = "paper (Amdahl) stage model" if self.model == "paper" else "stage model"
        return f"{model} ({self.schedule}, {self.provisioning} provisioning)"

    def to_json_dict(self) -> dict:
        return {"model": self.model, "schedule": self.schedule,
                "provisioning": self.provisioning, "microbatches": self.microbatches,
                "max_microbatches": self.max_microbatches, "objective": self.objective}

    def check(self, problem: Problem) -> None:
        """Raise ValueError when this pricing does not fit the problem."""
        if problem.cost_model != self.model:
            raise ValueError(f"pricing model {self.model!r} differs from the problem's "
                             f"cost model {problem.cost_model!r}")

    # ---- pricing ---------------------------------------------------------------------------
    def price(self, problem: Problem, plan: Plan) -> tuple[Plan, RunResult]:
        """(plan, result) of `plan` as it runs under this pricing: a stage without units gets
        them, a plan without m gets one; the plan's own units and m are kept when it gives
        them. The result is infeasible (with its reason) when no provisioning meets the limit
        or the plan does not fit the problem."""
        self.check(problem)
        plan = replace(plan, schedule=self.schedule) if plan.schedule != self.schedule \
            else plan
        if plan.ps is not None:  # the plan names its PS hosts: price those
            from heterps_sim.cost.ps_hosts import problem_for_plan
            problem = problem_for_plan(problem, plan.ps.resource, plan.ps.num_shards)
        if self.schedule == "async" and self.model == "default":
            return self._price_async(problem, plan)
        stage_result = evaluate_plan(problem, plan, self.provisioning)  # also checks the fit
        if not self.flushed:
            return plan, stage_result
        if stage_result.reason and not stage_result.reason.startswith("throughput"):
            return plan, replace(stage_result, provisioning="flushed")  # does not fit at all
        if any(s.is_mixed for s in plan.stages) and stage_result.stages:
            # a mixed stage's finish-together split has no unit options in the flushed
            # search: the stage model's units, priced as they run
            plan = plan.with_replicas([s.num_replicas for s in stage_result.stages])
        if all(s.num_replicas is not None for s in plan.stages):
            m = plan.num_microbatches if plan.num_microbatches > 1 else self.microbatches
            fixed = replace(plan, num_microbatches=m) if m else plan
            return fixed, flushed_result(problem, fixed)
        return self._provision(problem, plan, stage_result)

    def search_problem(self, problem: Problem) -> Problem:
        """The problem a search under this pricing costs plans on: an async plan's units
        also hold their stage's stashed weight versions, counted at staleness 1 (what a
        plan with at least as many microbatches as stages has; price() counts each plan's
        own)."""
        if self.schedule == "async" and self.model == "default":
            return with_stashed_weights(problem, 1)
        return problem

    def _price_async(self, problem: Problem, plan: Plan) -> tuple[Plan, RunResult]:
        """The stage model with each unit's memory holding the weight versions the plan's
        staleness keeps (with_stashed_weights), units and m set as the engine runs them.
        A plan whose staleness is 0 (one stage with at least as many microbatches as units,
        heterps_sim.core.asynchrony) is the exception: each step waits for the update,
        all-reduce and pushes of the step before, so it trains synchronously and is priced as
        it flushes (flushed_result; the simulator runs it so too)."""
        d = _plan_staleness(plan) if plan.num_microbatches > 1 and all(
            s.num_replicas is not None for s in plan.stages) else 1
        result = evaluate_plan(with_stashed_weights(problem, d), plan, self.provisioning)
        if not result.feasible:  # no units to run it with (a stage that cannot reach the
            return plan, result  # limit has 0 in the result): the plan as given, refused
        plan = self._run_as_async(problem, plan, result)
        try:
            runs = _plan_staleness(plan)
        except ValueError as exc:  # m far below the units in flight: the engine refuses it
            return plan, replace(result, feasible=False, reason=str(exc), cost_usd=math.inf)
        if runs == 0:  # no step overlaps another: it runs as it flushes (in 1F1B's order)
            result = flushed_result(with_stashed_weights(problem, 0),
                                    replace(plan, schedule="1f1b"))
            return plan, replace(result, extra={**result.extra, "synchronous": True})
        if runs != d:  # more versions in flight than counted: count them
            result = evaluate_plan(with_stashed_weights(problem, runs), plan, self.provisioning)
        return plan, result

    def _run_as_async(self, problem: Problem, plan: Plan, stage_result: RunResult) -> Plan:
        """An async plan as the engine runs it: the stage model's units where the plan gives
        none, and m (the plan's, else the pricing's, else the simulator's default for those
        units), so its staleness (heterps_sim.core.asynchrony) is defined."""
        if any(s.num_replicas is None for s in plan.stages):
            plan = plan.with_replicas([s.num_replicas for s in stage_result.stages])
        if plan.num_microbatches <= 1:
            plan = replace(plan, num_microbatches=self.microbatches or _default_m(problem, plan))
        return plan

    def _provision(self, problem: Problem, plan: Plan, stage_result: RunResult
                   ) -> tuple[Plan, RunResult]:
        """The cheapest units and m for the plan's cuts and types under the flushed form;
        when none meets the limit, the stage model's units priced as they run (infeasible)."""
        from heterps_sim.schedulers.exact.flushed_provision import provision_flushed
        ms = ([plan.num_microbatches] if plan.num_microbatches > 1
              else self.microbatch_counts(problem))
        got = provision_flushed(problem, plan, ms) if ms else None
        if got is not None:
            return got.plan, flushed_result(problem, got.plan, "flushed")
        ks = [s.num_replicas or (stage_result.stages[g].num_replicas if stage_result.stages
                                 else 1) or 1 for g, s in enumerate(plan.stages)]
        fixed = Plan(stages=tuple(replace(s, num_replicas=k) for s, k in zip(plan.stages, ks)),
                     num_microbatches=ms[0] if ms else plan.num_microbatches,
                     schedule=plan.schedule)
        result = flushed_result(problem, fixed, "flushed")
        if result.feasible or not result.reason.startswith("throughput"):
            return fixed, result
        span = f"{ms[0]}-{ms[-1]}" if len(ms) > 1 else str(ms[0]) if ms else "none"
        why = (f"no units for these stages meet the limit {problem.throughput_limit:.6g} "
               f"samples/s as the pipeline flushes (m = {span}); the stage model, which "
               f"ignores the flush, gives {stage_result.throughput:.6g}")
        return fixed, replace(result, reason=why)


def with_stashed_weights(problem: Problem, d: int) -> Problem:
    """The problem as an async plan of staleness d runs it (heterps_sim.core.asynchrony):
    besides its training state, a unit keeps a copy of its stage's dense weights for each
    step in flight, at most d + 1 (the engine's runtime/versions.py). Default model only
    (the paper's has no memory); a problem without parameter sizes is returned as it is."""
    if problem.cost_model != "default" or problem.param_bytes is None:
        return problem
    c = problem.unit_costs
    stash = (d + 1) * np.asarray(problem.param_bytes, np.float64)
    return replace(problem, costs=replace(c, state_bytes=c.state_bytes + stash))


def _plan_staleness(plan: Plan) -> int:
    from heterps_sim.core.asynchrony import staleness
    return staleness([s.num_replicas for s in plan.stages], plan.num_microbatches)


def flushed_result(problem: Problem, plan: Plan, provisioning: str = "fixed") -> RunResult:
    """The RunResult of a provisioned plan (every stage's units set) under the flushed closed
    form with the deterministic effects: throughput and cost as the plan runs. Memory, unit
    ranges and caps are checked as evaluate_plan checks them; per-stage rows keep each stage's
    own time alone (its utilisation then shows what the flush costs it)."""
    base = evaluate_plan(problem, plan, "least")
    if base.reason and not base.reason.startswith("throughput"):
        return replace(base, provisioning=provisioning)
    m = plan.num_microbatches
    thr = flushed_throughput(problem, plan, m if m > 1 else None, allreduce=True,
                             transfers=True, contention=True, ps=True)
    used_m = m if m > 1 else _default_m(problem, plan)
    per_hour = base.cost_per_hour
    cost = job_cost(problem, per_hour, thr, plan_startup_s(problem, plan_stages(problem, plan)))
    feasible = thr >= problem.throughput_limit * (1 - 1e-12)
    reason = "" if feasible else (
        f"throughput {thr:.6g} samples/s as the pipeline flushes (m = {used_m}) is below the "
        f"limit {problem.throughput_limit:.6g}")
    stages = tuple(replace(s, utilisation=thr / s.throughput if s.throughput > 0 else 0.0)
                   for s in base.stages)
    return replace(base, feasible=feasible, reason=reason, throughput=thr,
                   step_time_s=problem.batch_size / thr, cost_usd=cost if feasible else math.inf,
                   hours=problem.num_samples / thr / 3600.0 if feasible else math.inf,
                   provisioning=provisioning, stages=stages,
                   extra={**base.extra, "model": "flushed", "num_microbatches": used_m,
                          **(billing_extra(problem, plan_stages(problem, plan), thr)
                             if feasible else {"billing": None})})


def _default_m(problem: Problem, plan: Plan) -> int:
    from heterps_sim.cost.flush import plan_microbatches
    return plan_microbatches(problem, plan)
