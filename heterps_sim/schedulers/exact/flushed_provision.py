"""One plan under the flushed closed form (cost/flush.py): its cheapest units and microbatch
count, exactly, and its RunResult.

A scheduler chooses where the cuts fall and which type runs each stage; the stage model
(cost/reference.py) then gives each stage its units as if the pipeline never flushed. Here the
same cuts and types are provisioned as the plan runs: flushed.solve with the plan's cuts and
types fixed searches every unit count of every stage at each m (the label search over one
path: a few labels per stage), so the answer is the cheapest provisioning of that plan whose
flushed throughput meets the limit.
"""

from __future__ import annotations

import math
from dataclasses import replace

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.cost.flush import FLUSHED, flushed_throughput
from heterps_sim.cost.reference import evaluate_plan, job_cost, plan_stages, plan_startup_s
from heterps_sim.schedulers.exact.flushed import EFFECTS, FlushedOptimum, LabelLimit, solve

MAX_MICROBATCHES = 64
"""Microbatch counts searched when the plan and the scenario leave m open: 2..this."""


def applies(problem: Problem, plan: Plan) -> bool:
    """Whether the flushed form prices this plan: the default model, a flushed schedule and
    single-type stages (a mixed stage's finish-together split has no unit options here)."""
    return (problem.cost_model == "default" and plan.schedule in FLUSHED
            and all(not s.replicas for s in plan.stages))


def microbatch_counts(problem: Problem, plan: Plan, max_m: int = MAX_MICROBATCHES) -> list[int]:
    """The plan's own m when it sets one, else the scenario's, else 2..max_m (within B)."""
    for m in (plan.num_microbatches, problem.unit_costs.num_microbatches):
        if m > 1:
            return [m]
    return [m for m in range(2, max_m + 1) if m <= problem.batch_size]


def provision_flushed(problem: Problem, plan: Plan, ms: list[int] | None = None, *,
                      effects: tuple[str, ...] = EFFECTS,
                      max_labels: int = 200_000) -> FlushedOptimum | None:
    """The cheapest units and m for `plan`'s cuts and types whose flushed throughput meets the
    limit (None: none does at any m in `ms`, default microbatch_counts). Units the plan already
    gives are not kept: every stage is provisioned afresh."""
    if not applies(problem, plan):
        raise ValueError("provision_flushed: a default-model plan with a flushed schedule and "
                         "single-type stages")
    index = {name: i for i, name in enumerate(problem.layer_names)}
    types = {name: j for j, name in enumerate(problem.type_names)}
    ends, stage_types = set(), {}
    for stage in plan.stages:
        stage_types[index[stage.layers[0]]] = types[stage.resource]
        ends.add(index[stage.layers[-1]])
    best = None
    for m in ms if ms is not None else microbatch_counts(problem, plan):
        try:
            got = solve(problem, m, plan.schedule, effects=effects, ends=frozenset(ends),
                        stage_types=stage_types, fixed_cuts=True, max_labels=max_labels,
                        incumbent=best.cost_usd * (1 - 1e-9) if best else math.inf)
        except LabelLimit:  # one path has few labels; a budget this large is never reached
            continue
        if got is not None:
            best = got
    return best


def flushed_result(problem: Problem, plan: Plan, provisioning: str = "fixed") -> RunResult:
    """The RunResult of a provisioned plan (every stage's units and m set) under the flushed
    closed form with the deterministic effects: throughput and cost as the plan runs. Memory,
    unit ranges and caps are checked as evaluate_plan checks them; per-stage rows keep each
    stage's own time alone (its utilisation then shows what the flush costs it)."""
    base = evaluate_plan(problem, plan, "least")
    if base.reason and not base.reason.startswith("throughput"):
        return replace(base, provisioning=provisioning)
    m = plan.num_microbatches
    thr = flushed_throughput(problem, plan, m if m > 1 else None, allreduce=True,
                             transfers=True, contention=True, ps=True)
    per_hour = base.cost_per_hour
    cost = job_cost(problem, per_hour, thr, plan_startup_s(problem, plan_stages(problem, plan)))
    feasible = thr >= problem.throughput_limit * (1 - 1e-12)
    reason = "" if feasible else (
        f"throughput {thr:.6g} samples/s as the pipeline flushes (m = {m}) is below the limit "
        f"{problem.throughput_limit:.6g}")
    stages = tuple(replace(s, utilisation=thr / s.throughput if s.throughput > 0 else 0.0)
                   for s in base.stages)
    return replace(base, feasible=feasible, reason=reason, throughput=thr,
                   step_time_s=problem.batch_size / thr, cost_usd=cost if feasible else math.inf,
                   hours=problem.num_samples / thr / 3600.0 if feasible else math.inf,
                   provisioning=provisioning, stages=stages,
                   extra={**base.extra, "model": "flushed", "num_microbatches": m})


def as_it_runs(problem: Problem, plan: Plan, stage_result: RunResult
               ) -> tuple[Plan, RunResult, dict]:
    """(plan, result, notes) of a scheduler's plan provisioned as it runs: its cuts and types
    with the cheapest units and m under the flushed form, or, when none meets the limit, the
    stage model's units priced as they would run (infeasible, saying so). The notes keep the
    stage model's numbers for comparison."""
    notes = {"objective": "flushed", "stage_model_throughput": stage_result.throughput,
             "stage_model_cost_usd": stage_result.cost_usd}
    got = provision_flushed(problem, plan)
    if got is not None:
        return got.plan, flushed_result(problem, got.plan, "flushed"), notes
    ks = [s.num_replicas or stat.num_replicas or 1
          for s, stat in zip(plan.stages, stage_result.stages or [None] * len(plan.stages))] \
        if stage_result.stages else [s.num_replicas or 1 for s in plan.stages]
    ms = microbatch_counts(problem, plan)
    fixed = Plan(stages=tuple(replace(s, num_replicas=k) for s, k in zip(plan.stages, ks)),
                 num_microbatches=ms[0] if len(ms) == 1 else plan.num_microbatches,
                 schedule=plan.schedule)
    result = flushed_result(problem, fixed, "flushed")
    if result.feasible or not result.reason.startswith("throughput"):
        return fixed, result, notes
    span = f"{ms[0]}-{ms[-1]}" if len(ms) > 1 else str(ms[0])
    why = (f"no units for these stages meet the limit {problem.throughput_limit:.6g} samples/s "
           f"as the pipeline flushes (m = {span}); the stage model, which ignores the flush, "
           f"gives {stage_result.throughput:.6g}")
    return fixed, replace(result, reason=why), notes


def price_plan(problem: Problem, plan: Plan, mode: str = "least") -> tuple[Plan, RunResult]:
    """(plan, result) of a plan as it runs: under the default model with a flushed schedule,
    its own units when it gives them all (at its m, else the simulator's default for its
    units), else its cheapest units and m (as_it_runs); otherwise evaluate_plan's."""
    result = evaluate_plan(problem, plan, mode)  # also checks the plan fits the problem
    if not applies(problem, plan):
        return plan, result
    if all(s.num_replicas is not None for s in plan.stages):
        return plan, flushed_result(problem, plan)
    plan, result, _ = as_it_runs(problem, plan, result)
    return plan, result
