"""Bayesian optimisation with optuna's TPE over a stage-structured parametrisation.

A trial picks `num_stages` (1..max_stages), `num_stages - 1` cut points as fractions of the
chain (`cut_g` in [0, 1), sorted; coinciding cuts give fewer stages) and a type per stage
(`type_g`, categorical over all types). Where a stage's type cannot hold one of its layers
(not runnable, or no units), that layer takes the type that costs it least per batch
(SearchSpace.cheapest), so only usable pairs are ever costed. Objective: log(cost in USD);
an infeasible plan scores PENALTY + log(1 + its shortfall) (search_space: how far its slowest
stage is from the limit), so TPE also learns which infeasible regions are nearer.
`budget` counts evaluations, i.e. trials of new plans (TPE's own cost per trial grows with
the history, so budgets here are hundreds, not tens of thousands). TPE soon proposes plans it
has already tried (on small spaces, the same one over and over): such a trial is told its
known value at no cost and the next trial is a random plan not yet costed (queued with
`study.enqueue_trial`, so TPE learns from it too). At most 3 x budget trials; stops early
when random draws keep finding only plans already costed (a small space).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, SchedulerConfig
from heterps_sim.schedulers.search.space import INFEASIBLE, PlanBudget, SearchSpace, start_search

PENALTY = 1e4
"""Objective of an infeasible trial (log costs in USD are far below)."""


class BayesianScheduler:
    """optuna TPE over (number of stages, cut points, type per stage)."""

    name = "bayesian"

    class Config(SchedulerConfig):
        budget: int = Field(default=300, ge=1)
        """Plan evaluations (trials of new plans; one more re-checks the winner, see
        search_space)."""
        max_stages: int = Field(default=8, ge=1)
        """Most stages a trial may choose (capped at the number of layers)."""
        startup_trials: int = Field(default=20, ge=1)
        """Random trials before TPE starts modelling."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        import optuna  # imported when used: listing schedulers stays light

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        cfg = self.config
        space, budget, rng = start_search(problem, evaluate, cfg)
        sampler = optuna.samplers.TPESampler(seed=cfg.seed, n_startup_trials=cfg.startup_trials)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        trials = repeats = exhausted = 0
        while budget.left > 0 and trials < 3 * cfg.budget and exhausted < 3:
            trial = study.ask()
            plan = self._assignment(trial, space)
            repeat = budget.seen(plan)
            scores = budget.scores(plan[None, :])
            if len(scores) == 0:
                break
            trials += 1
            study.tell(trial, self._objective(float(scores[0])))
            if repeat:  # TPE is stuck on a plan it knows: the next trial explores
                repeats += 1
                found = self._enqueue_new(study, space, budget, rng)
                exhausted = 0 if found else exhausted + 1  # a small space, all but costed
        self.notes = {"evaluations": budget.used, "trials": trials, "repeats": repeats,
                      "best_cost_usd": budget.best_cost}
        return budget.final_plan(self.name)

    @staticmethod
    def _objective(score: float) -> float:
        if score < INFEASIBLE:
            return math.log(score)
        return PENALTY + min(math.log(score / INFEASIBLE), 1e3)

    def _max_stages(self, space: SearchSpace) -> int:
        return max(1, min(self.config.max_stages, space.num_layers))

    def _assignment(self, trial, space: SearchSpace) -> np.ndarray:
        L, M = space.num_layers, space.num_types
        num = trial.suggest_int("num_stages", 1, self._max_stages(space))
        cuts = sorted({1 + min(int(trial.suggest_float(f"cut_{g}", 0.0, 1.0) * (L - 1)), L - 2)
                       for g in range(num - 1)})
        bounds = [0, *cuts, L]
        a = np.empty(L, np.int64)
        for g, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
            a[s:e] = trial.suggest_categorical(f"type_{g}", list(range(M)))
        bad = ~space.usable[np.arange(L), a]
        a[bad] = space.cheapest[bad]
        return a

    def _enqueue_new(self, study, space: SearchSpace, budget: PlanBudget,
                     rng: np.random.Generator) -> bool:
        """Queue a random plan not costed yet, written in the trial's parameters; False when
        256 random draws found none."""
        for plan in space.sample(rng, 256, self._max_stages(space)):
            starts, _ = space.stages(plan)
            if budget.seen(plan) or len(starts) > self._max_stages(space):
                continue
            L = space.num_layers
            params = {"num_stages": len(starts)}
            params.update({f"cut_{g}": (b - 0.5) / (L - 1) for g, b in enumerate(starts[1:])})
            params.update({f"type_{g}": int(plan[b]) for g, b in enumerate(starts)})
            study.enqueue_trial(params)
            return True
        return False
