"""A scheduler's answer as the commands give it: the plan provisioned as it runs, and replaced
by `exact-flushed`'s when that is the only way to meet the limit or, for `exact`, cheaper.

`schedule`, `simulate`, `report` and Python callers who want the commands' plan all go
through `plan_as_it_runs`, so they answer with the same plan. Under the default model a plan
that flushes (gpipe, 1f1b) gets its cheapest units and microbatch count under the flushed
closed form (run_scheduler's objective="flushed"). Then:

- when no units for the scheduler's cuts and types meet the limit as the pipeline flushes,
  the plan is replaced by `exact-flushed`'s (FALLBACK_MAX_LABELS per m);
- for `exact`, whose cuts are the optimum of the steady-pipeline stage model, a short
  `exact-flushed` search (REFINE_MAX_LABELS per m) runs too, and its plan is taken when it
  costs less.

The notes say which happened (`replaced_by`); the baselines otherwise keep their own plans.
"""

from __future__ import annotations

from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import ScheduleOutcome, run_scheduler

FALLBACK_MAX_LABELS = 200_000
"""Labels per microbatch count of the flushed search that replaces a plan whose cuts and types
cannot meet the limit as the pipeline flushes (a few seconds at 64 x 64)."""
REFINE_MAX_LABELS = 30_000
"""Labels per microbatch count of the flushed search that `exact`'s plan is compared with
(about a second on the shipped scenarios, 7 s on synthetic-256x64)."""


def plan_as_it_runs(scheduler, problem: Problem, mode: str = "least") -> ScheduleOutcome:
    """Run `scheduler` on `problem` and answer as the commands do (module docstring)."""
    return replace_by_flushed_search(problem, run_scheduler(scheduler, problem, mode,
                                                            objective="flushed"), mode)


def replace_by_flushed_search(problem: Problem, outcome: ScheduleOutcome,
                              mode: str = "least") -> ScheduleOutcome:
    """`outcome` (provisioned as it runs), or `exact-flushed`'s outcome when the scheduler's
    plan misses the limit as the pipeline flushes or, for `exact`, costs more."""
    from heterps_sim.schedulers.registry import make_scheduler
    name = outcome.scheduler
    if (outcome.plan is None or outcome.result is None or name == "exact-flushed"
            or outcome.notes.get("objective") != "flushed"):
        return outcome
    missing = not outcome.result.feasible
    if not missing and name != "exact":
        return outcome
    budget = FALLBACK_MAX_LABELS if missing else REFINE_MAX_LABELS
    searched = run_scheduler(make_scheduler("exact-flushed", max_labels=budget), problem, mode,
                             objective="flushed")
    if searched.result is None or not searched.result.feasible or (
            not missing and searched.result.cost_usd >= outcome.result.cost_usd * (1 - 1e-9)):
        return outcome
    why = ("the scheduler's cuts and types miss the limit as the pipeline flushes" if missing
           else f"cheaper as the pipeline flushes than exact's cuts "
                f"({outcome.result.cost_usd:.6g} USD)")
    notes = {**outcome.notes, **searched.notes, "replaced_by": f"exact-flushed ({why})"}
    return ScheduleOutcome(outcome.scheduler, searched.plan, searched.result,
                           outcome.evaluations + searched.evaluations,
                           outcome.wall_s + searched.wall_s, notes)
