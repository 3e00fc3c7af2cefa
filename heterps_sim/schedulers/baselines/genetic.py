"""Genetic algorithm over type assignments, costed a generation at a time.

Population: random stage-structured plans (search_space.SearchSpace.sample). Each
generation keeps the `elite` best unchanged and breeds the rest: two parents by tournament
(the best score of `tournament` random members: cheapest feasible, else nearest to the
limit), two-point crossover at stage boundaries of either parent (whole stages travel), then
one random move (a layer's type, a stage's type, a boundary shift, a split, a merge) with
probability `mutation_rate`, repeated with the same probability. A child that was costed
before (a repeat is free but teaches nothing) is moved again, up to 3 times, and else
replaced by a fresh random plan (an immigrant), so each generation spends its evaluations
on new plans and a converged population keeps exploring. Stops when the budget is spent or
5 generations in a row brought nothing new (a small space, exhausted).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import BudgetedConfig, Evaluator
from heterps_sim.schedulers.search.space import PlanBudget, SearchSpace, start_search


class GeneticScheduler:
    """Tournament selection, segment-preserving crossover, stage/layer mutation, elitism."""

    name = "genetic"

    class Config(BudgetedConfig):
        population: int = Field(default=64, ge=2)
        """Plans per generation."""
        elite: int = Field(default=2, ge=0)
        """Cheapest plans carried over unchanged."""
        tournament: int = Field(default=3, ge=1)
        """Members drawn per parent selection; the cheapest wins."""
        crossover_rate: float = Field(default=0.9, ge=0.0, le=1.0)
        """Chance a child is bred by crossover (else a copy of its first parent)."""
        mutation_rate: float = Field(default=0.7, ge=0.0, lt=1.0)
        """Chance of a (further) random move on a child."""

        @model_validator(mode="after")
        def _elite_below_population(self):
            if self.elite >= self.population:
                raise ValueError(f"elite ({self.elite}) must be below population "
                                 f"({self.population}), or no child is ever bred")
            return self

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        cfg = self.config
        space, budget, rng = start_search(problem, evaluate, cfg)
        pop = space.sample(rng, cfg.population, cfg.max_stages)
        scores = budget.scores(pop)
        pop = pop[:len(scores)]
        generations = idle = immigrants = 0
        while budget.left > 0 and idle < 5 and len(pop) > 0:
            used = budget.used
            order = np.argsort(scores, kind="stable")[:cfg.elite]
            children, fresh = self._children(space, budget, rng, pop, scores,
                                             cfg.population - len(order))
            child_scores = budget.scores(children)
            pop = np.concatenate([pop[order], children[:len(child_scores)]])
            scores = np.concatenate([scores[order], child_scores])
            generations += 1
            immigrants += fresh
            idle = idle + 1 if budget.used == used else 0
        self.notes = {"evaluations": budget.used, "generations": generations,
                      "immigrants": immigrants, "best_cost_usd": budget.best_cost}
        return budget.final_plan(self.name)

    def _children(self, space: SearchSpace, budget: PlanBudget, rng: np.random.Generator,
                  pop: np.ndarray, scores: np.ndarray, n: int) -> tuple[np.ndarray, int]:
        """n children, new to the budget and to each other where possible; and how many of
        them are immigrants."""
        children, keys, fresh = [], set(), 0
        for _ in range(n):
            child = self._child(space, rng, pop, scores)
            for _ in range(3):
                if not budget.seen(child) and child.tobytes() not in keys:
                    break
                child = space.mutate(rng, child)
            else:
                if budget.seen(child) or child.tobytes() in keys:
                    child = space.sample(rng, 1, self.config.max_stages)[0]
                    fresh += 1
            children.append(child)
            keys.add(child.tobytes())
        return np.array(children), fresh

    def _select(self, rng: np.random.Generator, scores: np.ndarray) -> int:
        members = rng.integers(len(scores), size=self.config.tournament)
        return int(members[np.argmin(scores[members])])

    def _child(self, space: SearchSpace, rng: np.random.Generator, pop: np.ndarray,
               scores: np.ndarray) -> np.ndarray:
        first = pop[self._select(rng, scores)]
        if rng.random() < self.config.crossover_rate:
            child = space.crossover(rng, first, pop[self._select(rng, scores)])
        else:
            child = first.copy()
        while rng.random() < self.config.mutation_rate:
            child = space.mutate(rng, child)
        return child
