"""A cheap local polish of the policy's best plans: best-improvement descent, batched.

From each start plan: cost the whole one-move neighbourhood in one PlanBudget call
(search_space.SearchSpace.neighbours: a new type for one layer, a stage, two adjacent stages
merged, or up to `max_shift` layers at a stage boundary moved or split off with a new type),
move to the best neighbour if it is cheaper, repeat until no neighbour is (a local optimum)
or the step or evaluation budget is spent. Scores are PlanBudget's (cost when feasible,
graded shortfall when not), so an infeasible start walks towards feasibility. Repeated plans
are cached and cost nothing; every new plan counts on the evaluator.
"""

from __future__ import annotations

import numpy as np

from ..search_space import PlanBudget, SearchSpace


def descend(space: SearchSpace, budget: PlanBudget, start: np.ndarray, max_steps: int,
            max_shift: int = 2) -> tuple[np.ndarray, float, int]:
    """(plan, score, steps taken) after best-improvement descent from `start`."""
    current = np.asarray(start, np.int64)
    scores = budget.scores(current[None, :])
    if len(scores) == 0:
        return current, np.inf, 0
    score = float(scores[0])
    for step in range(max_steps):
        if budget.left <= 0:
            return current, score, step
        block = space.neighbours(current, max_shift)
        scores = budget.scores(block)
        if len(scores) == 0 or scores.min() >= score * (1 - 1e-12):
            return current, score, step
        i = int(np.argmin(scores))
        current, score = block[i], float(scores[i])
    return current, score, max_steps


def polish(space: SearchSpace, budget: PlanBudget, plans: np.ndarray, scores: np.ndarray,
           starts: int, max_steps: int, max_shift: int = 2) -> dict:
    """Descend from the `starts` best distinct plans (by score); returns bookkeeping."""
    order = np.argsort(scores, kind="stable")
    seen: set[bytes] = set()
    chosen = []
    for i in order:
        key = plans[i].tobytes()
        if key not in seen:
            seen.add(key)
            chosen.append(plans[i])
        if len(chosen) >= starts:
            break
    before = float(scores[order[0]]) if len(order) else np.inf
    steps = 0
    for plan in chosen:
        _, _, taken = descend(space, budget, plan, max_steps, max_shift)
        steps += taken
    return {"polish_starts": len(chosen), "polish_steps": steps,
            "best_before_polish": before, "best_after_polish": budget.best_cost}
