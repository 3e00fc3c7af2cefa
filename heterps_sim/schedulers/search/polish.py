"""A cheap local polish of the policy's best plans: best-improvement descent, batched.

From each start plan: cost the whole one-move neighbourhood in one PlanBudget call
(search_space.SearchSpace.neighbours: a new type for one layer, a stage, two adjacent stages
merged, or up to `max_shift` layers at a stage boundary moved or split off with a new type),
move to the best neighbour if it is cheaper, repeat until no neighbour is (a local optimum)
or the step or evaluation budget is spent. With `splits`, at such a local optimum the descent
also tries every stage's prefixes and suffixes on every usable type (split_moves: a stage cut
anywhere, or a boundary shifted any distance; from a one-stage plan the only way to a second
stage) and goes on if one is cheaper. Then, still at a local optimum, each of `compound`
(functions plan -> (K, L) plans, e.g. level_moves.level_moves: many stages changed at once,
raising the bottleneck level) in turn, until one gives a cheaper plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from heterps_sim.schedulers.search.space import INFEASIBLE, PlanBudget, SearchSpace
from heterps_sim.util import progress

Moves = Callable[[np.ndarray], np.ndarray]


def split_moves(space: SearchSpace, a: np.ndarray) -> np.ndarray:
    """(K, L): `a` with a prefix or a suffix of one stage on another usable type."""
    starts, ends = space.stages(a)
    rows = [np.empty((0, len(a)), np.int64)]
    for s, e in zip(starts, ends):
        for c in range(s + 1, e):
            for lo, hi in ((s, c), (c, e)):
                types = np.flatnonzero(space.segment_ok(lo, hi))
                types = types[types != a[lo]]
                block = np.repeat(a[None, :], len(types), axis=0)
                block[:, lo:hi] = types[:, None]
                rows.append(block)
    return np.concatenate(rows)


def descend(space: SearchSpace, budget: PlanBudget, start: np.ndarray, max_steps: int,
            max_shift: int = 2, splits: bool = False,
            compound: Sequence[Moves] = ()) -> tuple[np.ndarray, float, int]:
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
        if splits and (len(scores) == 0 or scores.min() >= score * (1 - 1e-12)):
            block = split_moves(space, current)  # only at a local optimum: many plans
            scores = budget.scores(block)
        for moves in compound:
            if len(scores) and scores.min() < score * (1 - 1e-12):
                break
            block = moves(current)
            scores = budget.scores(block)
        if len(scores) == 0 or scores.min() >= score * (1 - 1e-12):
            return current, score, step
        i = int(np.argmin(scores))
        current, score = block[i], float(scores[i])
    return current, score, max_steps


def polish(space: SearchSpace, budget: PlanBudget, plans: np.ndarray, scores: np.ndarray,
           starts: int, max_steps: int, max_shift: int = 2,
           splits: bool = False,
           compound: Sequence[Moves] = ()) -> tuple[dict, list[np.ndarray]]:
    """Descend from the `starts` best distinct plans (by score); returns (bookkeeping, the
    local optima reached)."""
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
    steps, ends = 0, []
    for plan in progress.bar(chosen, desc="polish", unit="start"):
        end, _, taken = descend(space, budget, plan, max_steps, max_shift, splits, compound)
        steps += taken
        ends.append(end)
    return {"polish_starts": len(chosen), "polish_steps": steps,
            "best_before_polish": before, "best_after_polish": budget.best_cost}, ends


def des_descend(space: SearchSpace, budget: PlanBudget, judge, start: np.ndarray,
                max_steps: int, top: int, max_shift: int = 2,
                splits: bool = False) -> tuple[np.ndarray, float, int]:
    """(plan, DES score, steps) after descent by the DES verdict (`judge`: a DesJudge), the
    analytic model choosing which `top` neighbours per step are simulated."""
    current = np.asarray(start, np.int64)
    score = float(judge.scores(current[None, :])[0])
    for step in range(max_steps):
        block = space.neighbours(current, max_shift)
        if splits:
            block = np.concatenate([block, split_moves(space, current)])
        analytic = budget.scores(block)
        block = block[:len(analytic)]
        fresh = [i for i in np.argsort(analytic, kind="stable")
                 if analytic[i] < INFEASIBLE and not judge.seen(block[i])][:top]
        if not fresh:
            return current, score, step
        des = judge.scores(block[fresh])
        i = int(np.argmin(des))
        if des[i] >= score * (1 - 1e-12):
            return current, score, step
        current, score = block[fresh[i]], float(des[i])
    return current, score, max_steps
