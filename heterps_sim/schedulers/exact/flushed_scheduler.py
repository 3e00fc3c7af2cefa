"""`exact-flushed`: the cheapest plan as its flushed schedule runs, proven or with a certified
gap (certified.certified_optimum).

The `exact` scheduler optimises the stage model (a steady pipeline, each stage priced alone);
its plans can fall well short in the simulator, which runs the flush the engine runs. This
scheduler optimises cost/flush.py's closed form instead, over every microbatch count from 2
to 64 (or the set given), and returns the plan with its units and m. Its notes say
proven_optimal=True only when the search proved it; otherwise, past its work budget, they
carry the certified lower bound (lower_bound_usd) and gap_bound = cost / bound - 1.
"""

from __future__ import annotations

from pydantic import Field

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, SchedulerConfig
from heterps_sim.schedulers.exact.certified import certified_optimum, default_max_work

WORK_PER_LABEL = 100
"""max_labels (the earlier budget, in labels per microbatch count) counts as this many units
of work per label per microbatch count when max_work is not given."""


class FlushedExactScheduler:
    """Cheapest plan under the flushed closed form (default cost model, gpipe/1f1b)."""

    name = "exact-flushed"

    class Config(SchedulerConfig):
        microbatches: list[int] | None = Field(default=None, min_length=1)
        """Microbatch counts searched when the scenario's costs.num_microbatches is 1; None:
        every m from 2 to max_microbatches (and the batch size)."""
        max_microbatches: int = Field(default=64, ge=2)
        """The largest m searched when `microbatches` is None."""
        schedule: str = Field(default="gpipe", pattern="^(gpipe|1f1b)$")
        """The flushed schedule the plan runs with (1f1b differs only with contention)."""
        max_work: int | None = Field(default=None, ge=1)
        """Work units the search may spend (deterministic; None: the default, about 5 s at
        64 layers x 64 types on a 2-core machine, or max_labels' equivalent); past it the
        best plan found is returned with its certified gap."""
        max_labels: int | None = Field(default=None, ge=1)
        """The earlier budget in labels per microbatch count: when max_work is None,
        max_work = max_labels x WORK_PER_LABEL x the number of microbatch counts, at most the
        default."""
        target_gap: float = Field(default=0.0, ge=0.0)
        """Stop once the plan is within this fraction of the certified bound (0: prove it)."""

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

    def max_work(self, problem: Problem, num_ms: int) -> int:
        c = self.config
        if c.max_work is not None:
            return c.max_work
        if c.max_labels is not None:
            return min(c.max_labels * WORK_PER_LABEL * max(1, num_ms),
                       default_max_work(problem))
        return default_max_work(problem)

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        if problem.cost_model != "default":
            self.notes = {"reason": "exact-flushed prices the default cost model's flushed "
                                    "schedule; this problem uses the paper model"}
            raise NoFeasiblePlan("exact-flushed prices the default cost model's flushed "
                                 "schedule; this problem uses the paper model")
        ms = self.microbatch_counts(problem)
        if not ms:
            raise NoFeasiblePlan("exact-flushed: no microbatch count between 2 and the batch "
                                 f"size ({problem.batch_size})")
        got = certified_optimum(problem, schedule=self.config.schedule, microbatches=ms,
                                max_work=self.max_work(problem, len(ms)),
                                target_gap=self.config.target_gap)
        open_ = got.notes["open_microbatches"]
        self.notes = {"proven_optimal": got.proven, "microbatches_searched": _span(ms),
                      "microbatches_open": open_, "work": got.work,
                      "labels": got.notes["labels"]}
        if not got.proven:
            # not proven: the certified bound and how far the plan can be from the optimum
            self.notes["lower_bound_usd"] = got.lower_bound_usd
            self.notes["gap_bound"] = got.gap
        if got.best is None:
            why = ("no plan meets the limit under the flushed schedule at m = " + _span(ms)
                   if got.proven else
                   f"no plan found within the work budget "
                   f"({self.max_work(problem, len(ms)):,} units; "
                   f"no plan costs less than {got.lower_bound_usd:.6g} USD)")
            self.notes["reason"] = why
            raise NoFeasiblePlan(f"exact-flushed: {why}")
        best = got.best
        # the closed form's numbers (the evaluator's are the stage model's)
        self.notes.update(flushed_cost_usd=best.cost_usd, flushed_throughput=best.throughput,
                          num_microbatches=best.plan.num_microbatches)
        return best.plan


def _span(ms: list[int]) -> str:
    """2-64 for a run of consecutive counts, else the list."""
    if len(ms) > 2 and ms == list(range(ms[0], ms[-1] + 1)):
        return f"{ms[0]}-{ms[-1]}"
    return ", ".join(map(str, ms))
