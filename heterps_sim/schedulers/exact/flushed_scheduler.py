"""`exact-flushed`: the cheapest plan as its flushed schedule runs, exactly (flushed.py).

The `exact` scheduler optimises the stage model (a steady pipeline, each stage priced alone);
its plans can fall well short in the simulator, which runs the flush the engine runs. This
scheduler optimises cost/flush.py's closed form instead (within ~0.25% of the simulator over
the benchmark's optima), for each microbatch count in turn, and returns the plan with its
units and m. The search is exact but its work grows fast with layers x types and with
capped types: past `max_labels` at some m, that m is left out and notes["proven_optimal"]
is False.
"""

from __future__ import annotations

from pydantic import Field

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, SchedulerConfig
from heterps_sim.schedulers.exact.flushed import LabelLimit, optimum


class FlushedExactScheduler:
    """Cheapest plan under the flushed closed form (default cost model, gpipe/1f1b)."""

    name = "exact-flushed"

    class Config(SchedulerConfig):
        microbatches: list[int] = Field(default=[4, 8, 16], min_length=1)
        """Microbatch counts searched (each exactly) when the scenario's costs.num_microbatches
        is 1; otherwise that count only."""
        schedule: str = Field(default="gpipe", pattern="^(gpipe|1f1b)$")
        """The flushed schedule the plan runs with (both have the same closed form)."""
        max_labels: int = Field(default=2_000_000, ge=1)
        """Labels one search may make; past it that m is skipped (not proven optimal)."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        if problem.cost_model != "default":
            raise NoFeasiblePlan("exact-flushed prices the default cost model's flushed "
                                 "schedule; this problem uses the paper model")
        chosen = problem.unit_costs.num_microbatches
        ms = [chosen] if chosen > 1 else sorted(set(self.config.microbatches))
        ms = [m for m in ms if 2 <= m <= problem.batch_size]
        if not ms:
            raise NoFeasiblePlan("exact-flushed: no microbatch count between 2 and the batch "
                                 f"size ({problem.batch_size})")
        best, skipped, labels, per_m = None, [], 0, {}
        for m in ms:
            try:
                got = optimum(problem, m, self.config.schedule, max_labels=self.config.max_labels)
            except LabelLimit:
                skipped.append(m)
                continue
            if got is None:
                per_m[m] = None  # no plan meets the limit at this m
                continue
            labels += got.labels
            per_m[m] = got.cost_usd
            if best is None or got.cost_usd < best.cost_usd:
                best = got
        self.notes = {"proven_optimal": not skipped, "microbatches_skipped": skipped,
                      "cost_per_microbatches": {str(k): v for k, v in per_m.items()},
                      "labels": labels}
        if best is None:
            why = (f"past {self.config.max_labels} labels at m = {skipped}" if skipped else
                   "no plan meets the limit under the flushed schedule at m = "
                   + ", ".join(map(str, ms)))
            self.notes["reason"] = why
            raise NoFeasiblePlan(f"exact-flushed: {why}")
        # the closed form's numbers (the evaluator's are the stage model's)
        self.notes.update(flushed_cost_usd=best.cost_usd, flushed_throughput=best.throughput,
                          num_microbatches=best.plan.num_microbatches)
        return best.plan
