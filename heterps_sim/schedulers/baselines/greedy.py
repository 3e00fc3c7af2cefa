"""Greedy: a constructive start, then local search (iterated, with restarts) to the budget.

Start: the cheapest of every usable single-type plan and of "each layer on the type that
costs it least per batch". Local search: first improvement over the whole one-move
neighbourhood (search_space.SearchSpace.neighbours: a new type for one layer, a stage, two
adjacent stages merged, or a few layers at a stage boundary, i.e. shifted boundaries and
splits), scanned in random order `chunk` plans at a time; the best improving plan of the
first chunk that has one is taken. At a local optimum, restart: alternately from the best
plan found kicked by a few random moves (iterated local search), and from the best of a
fresh batch of random plans. Stops when the budget is spent.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import BudgetedConfig, Evaluator
from heterps_sim.schedulers.search.space import PlanBudget, SearchSpace, start_search


class GreedyScheduler:
    """Constructive start + first-improvement local search with restarts."""

    name = "greedy"

    class Config(BudgetedConfig):
        chunk: int = Field(default=128, ge=1)
        """Neighbours costed at a time; the best improving one of a chunk is taken."""
        max_shift: int = Field(default=2, ge=1)
        """Largest boundary shift (layers) in the neighbourhood."""
        kick_moves: int = Field(default=3, ge=1)
        """Random moves applied to the best plan for an iterated-local-search restart."""
        restart_samples: int = Field(default=64, ge=1)
        """Random plans drawn for a fresh restart (the cheapest is the start)."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        cfg = self.config
        space, budget, rng = start_search(problem, evaluate, cfg)
        starts = np.vstack([space.homogeneous(), space.cheapest[None, :]])
        current, score = self._best_of(budget, starts)
        descents = improvements = stale = 0
        # A small space is soon exhausted (repeats cost nothing): stop after 50 idle rounds.
        while current is not None and budget.left > 0 and stale < 50:
            used = budget.used
            current, score, steps = self._descend(space, budget, rng, current, score)
            descents += 1
            improvements += steps
            if budget.left <= 0:
                break
            current, score = self._restart(space, budget, rng, descents)
            stale = stale + 1 if budget.used == used else 0
        self.notes = {"evaluations": budget.used, "descents": descents,
                      "improvements": improvements, "best_cost_usd": budget.best_cost}
        return budget.final_plan(self.name)

    @staticmethod
    def _best_of(budget: PlanBudget, plans: np.ndarray) -> tuple[np.ndarray | None, float]:
        scores = budget.scores(plans)
        if len(scores) == 0:
            return None, np.inf
        i = int(np.argmin(scores))
        return plans[i], float(scores[i])

    def _restart(self, space: SearchSpace, budget: PlanBudget, rng: np.random.Generator,
                 descents: int) -> tuple[np.ndarray | None, float]:
        cfg = self.config
        if descents % 2 == 1 and budget.top:  # kick the best plan found
            plan = budget.top[0][1]
            for _ in range(cfg.kick_moves):
                plan = space.mutate(rng, plan)
            return self._best_of(budget, plan[None, :])
        return self._best_of(budget, space.sample(rng, cfg.restart_samples, cfg.max_stages))

    def _descend(self, space: SearchSpace, budget: PlanBudget, rng: np.random.Generator,
                 current: np.ndarray, score: float) -> tuple[np.ndarray, float, int]:
        """First-improvement local search from `current` to a local optimum or the budget
        (by score: infeasible plans move towards feasibility)."""
        steps = 0
        while budget.left > 0:
            neighbours = space.neighbours(current, self.config.max_shift)
            neighbours = neighbours[rng.permutation(len(neighbours))]
            for lo in range(0, len(neighbours), self.config.chunk):
                block = neighbours[lo:lo + self.config.chunk]
                scores = budget.scores(block)
                if len(scores) and scores.min() < score * (1 - 1e-12):
                    i = int(np.argmin(scores))
                    current, score, steps = block[i], float(scores[i]), steps + 1
                    break
                if len(scores) < len(block):  # budget spent
                    return current, score, steps
            else:
                return current, score, steps  # no neighbour is better: a local optimum
        return current, score, steps
