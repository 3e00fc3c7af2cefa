"""`exact-flushed`: the cheapest plan as its flushed schedule runs, exactly (flushed.py).

The `exact` scheduler optimises the stage model (a steady pipeline, each stage priced alone);
its plans can fall well short in the simulator, which runs the flush the engine runs. This
scheduler optimises cost/flush.py's closed form instead (within ~0.25% of the simulator over
the benchmark's optima), exactly for every microbatch count from 2 to 64 (or the set given),
and returns the plan with its units and m. The search is exact but its work grows fast with layers x types and with
capped types: past `max_labels` at some m, that m is left out and notes["proven_optimal"]
is False.
"""

from __future__ import annotations

from pydantic import Field

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, SchedulerConfig
from heterps_sim.schedulers.exact.flushed import best_over_microbatches, stage_model_optimum
from heterps_sim.schedulers.exact.flushed_provision import provision_flushed


class FlushedExactScheduler:
    """Cheapest plan under the flushed closed form (default cost model, gpipe/1f1b)."""

    name = "exact-flushed"

    class Config(SchedulerConfig):
        microbatches: list[int] | None = Field(default=None, min_length=1)
        """Microbatch counts searched (each exactly) when the scenario's costs.num_microbatches
        is 1; None: every m from 2 to max_microbatches (and the batch size)."""
        max_microbatches: int = Field(default=64, ge=2)
        """The largest m searched when `microbatches` is None."""
        schedule: str = Field(default="gpipe", pattern="^(gpipe|1f1b)$")
        """The flushed schedule the plan runs with (both have the same closed form)."""
        max_labels: int = Field(default=2_000_000, ge=1)
        """Labels one search may make (and 100x as many stage options tried); past it that m
        is skipped (not proven optimal)."""
        max_skipped: int = Field(default=3, ge=1)
        """After this many skipped m's, the rest are skipped unsearched."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def microbatch_counts(self, problem: Problem) -> list[int]:
        chosen = problem.unit_costs.num_microbatches
        if chosen > 1:
            ms = [chosen]
        elif self.config.microbatches is not None:
            ms = sorted(set(self.config.microbatches))
        else:
            ms = list(range(2, self.config.max_microbatches + 1))
        return [m for m in ms if 2 <= m <= problem.batch_size]

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        if problem.cost_model != "default":
            raise NoFeasiblePlan("exact-flushed prices the default cost model's flushed "
                                 "schedule; this problem uses the paper model")
        ms = self.microbatch_counts(problem)
        if not ms:
            raise NoFeasiblePlan("exact-flushed: no microbatch count between 2 and the batch "
                                 f"size ({problem.batch_size})")
        # the stage model's optimum: a lower bound on every plan's cost, and its cuts and
        # types provisioned as they run, the plan to beat
        bound, stage_plan = stage_model_optimum(problem)
        upper = None
        if stage_plan is not None:
            stage_plan = Plan(stages=stage_plan.stages, schedule=self.config.schedule)
            upper = provision_flushed(problem, stage_plan, ms)
        got = best_over_microbatches(problem, ms, self.config.schedule,
                                     max_labels=self.config.max_labels,
                                     max_skipped=self.config.max_skipped, upper=upper,
                                     lower_bound=bound)
        skipped, best = list(got.skipped), got.best
        self.notes = {"proven_optimal": not skipped, "microbatches_searched": _span(ms),
                      "microbatches_skipped": skipped, "labels": got.labels}
        if skipped and best is not None and bound > 0:
            # not proven: how far the plan can be from the optimum at most
            self.notes.update(lower_bound_usd=bound, gap_bound=best.cost_usd / bound - 1.0)
        if best is None:
            why = (f"past {self.config.max_labels} labels at m = {skipped}" if skipped else
                   "no plan meets the limit under the flushed schedule at m = " + _span(ms))
            self.notes["reason"] = why
            raise NoFeasiblePlan(f"exact-flushed: {why}")
        # the closed form's numbers (the evaluator's are the stage model's)
        self.notes.update(flushed_cost_usd=best.cost_usd, flushed_throughput=best.throughput,
                          num_microbatches=best.plan.num_microbatches)
        return best.plan


def _span(ms: list[int]) -> str:
    """2-64 for a run of consecutive counts, else the list."""
    if len(ms) > 2 and ms == list(range(ms[0], ms[-1] + 1)):
        return f"{ms[0]}-{ms[-1]}"
    return ", ".join(map(str, ms))
