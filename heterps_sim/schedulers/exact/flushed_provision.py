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

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.cost.flush import FLUSHED
from heterps_sim.schedulers.exact.flushed import EFFECTS, WORK_PER_LABEL, FlushedOptimum

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
    # One compiled search for the plan's path, run at each m: building it (the stage tables)
    # costs ~100x one run on a one-stage plan, and nothing in it depends on m.
    from heterps_sim.schedulers.exact.flushed_compiled import CompiledSearch
    search = CompiledSearch(problem, effects=tuple(effects), ends=frozenset(ends),
                            stage_types=stage_types, fixed_cuts=True, schedule=plan.schedule)
    best = None
    for m in ms if ms is not None else microbatch_counts(problem, plan):
        got = search.run(m, best.cost_usd * (1 - 1e-9) if best else math.inf,
                         max_labels=max_labels, max_work=max_labels * WORK_PER_LABEL)
        # one path has few labels: a budget this large is never reached (an m that did would
        # be skipped, as solve's LabelLimit was)
        if got.status == "found":
            best = got.best
    return best
