"""Random search: sample stage-structured plans, cost them in batches, keep the cheapest.

Each plan has 1..max_stages stages (uniform), random cut points and a type per stage drawn
uniformly from those usable on all its layers (search_space.SearchSpace.sample); uniform
per-layer types would make ~L stages, nearly all infeasible. No learning, no local moves:
the floor every other search has to beat at the same number of evaluations.
"""

from __future__ import annotations

from pydantic import Field

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import BudgetedConfig, Evaluator
from heterps_sim.schedulers.search.space import start_search


class RandomSearchScheduler:
    """Best of `budget` random plans (repeats are drawn again, not counted twice)."""

    name = "random"

    class Config(BudgetedConfig):
        batch: int = Field(default=4096, ge=1)
        """Plans sampled per batch (the last batch is cut at the budget)."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        cfg = self.config
        space, budget, rng = start_search(problem, evaluate, cfg)
        draws = idle = 0
        while budget.left > 0 and idle < 3:  # a small space: 3 batches in a row, nothing new
            used = budget.used
            plans = space.sample(rng, cfg.batch, cfg.max_stages)
            draws += len(budget.scores(plans))
            idle = idle + 1 if budget.used == used else 0
        self.notes = {"evaluations": budget.used, "draws": draws,
                      "best_cost_usd": budget.best_cost}
        return budget.final_plan(self.name)
