"""The `rl` polish's compound moves (heterps_sim/schedulers/search/level_moves.py): their stage estimates agree
with the batch cost model, their plans are valid and costed as PlanBudget says, and they reach
optima that the one-move polish misses."""

import numpy as np
import pytest

from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.schedulers.base import Evaluator, run_scheduler
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.schedulers.rl.stagewise.imitation import exact_assignment, random_problem
from heterps_sim.schedulers.search.level_moves import StageOptions, level_moves
from heterps_sim.schedulers.search.polish import descend
from heterps_sim.schedulers.search.space import INFEASIBLE, PlanBudget, SearchSpace
from heterps_sim.schedulers.search.window_moves import window_moves


def _far_above_limit(seed: int, layers: int = 10, types: int = 6):
    """A problem whose stages mostly need one unit (limit at 20x one unit's throughput)."""
    return random_problem(np.random.default_rng(seed), layers, types, limit_quantile=20.0)


@pytest.mark.parametrize(("seed", "limit"), [(3, 20.0), (4, 2.0), (5, 0.5)])
def test_stage_estimate_is_the_batch_cost_without_caps(seed, limit):
    problem = random_problem(np.random.default_rng(seed), 12, 8, limit_quantile=limit)
    space = SearchSpace(problem)
    opts = StageOptions(space)
    plans = space.sample(np.random.default_rng(seed), 200, 8)
    cost = evaluate_assignments(problem, plans).cost_usd
    checked = 0
    for a, c in zip(plans, cost):
        _, _, _, rate, thr = opts.stages(a)
        if not np.isfinite(c):
            assert thr.min() == 0 or not np.isfinite(rate).all()
            continue
        estimate = problem.num_samples / 3600.0 / thr.min() * rate.sum()
        assert estimate == pytest.approx(c, rel=1e-9)
        checked += 1
    assert checked > 20


@pytest.mark.parametrize("seed", [0, 5, 225])
@pytest.mark.parametrize("moves", [level_moves, window_moves])
def test_moves_are_valid_plans_costed_as_the_budget_says(seed, moves):
    problem = random_problem(np.random.default_rng(seed), 10, 6, limit_quantile=2.0)
    space = SearchSpace(problem)
    budget = PlanBudget(problem, Evaluator(problem), None)
    opts = StageOptions(space)
    block = []
    starts = space.sample(np.random.default_rng(seed), 256, 10)
    feasible = starts[budget.scores(starts) < INFEASIBLE]
    for start in feasible[:4]:
        rows = moves(opts, start)
        assert rows.shape[1] == problem.num_layers
        assert not (rows == start).all(axis=1).any()  # every row is a move
        block.append(rows)
    block = np.concatenate(block)
    assert len(block) > 0
    assert space.usable[np.arange(problem.num_layers), block].all()
    scores = budget.scores(block)
    for row, score in zip(block, scores):
        result = evaluate_plan(problem, budget.plan(row))
        if result.feasible:
            assert score == pytest.approx(result.cost_usd, rel=1e-9)
        else:
            assert score >= INFEASIBLE


def test_level_moves_raise_the_bottleneck():
    problem = _far_above_limit(225)
    opts = StageOptions(SearchSpace(problem))
    start = SearchSpace(problem).sample(np.random.default_rng(0), 1, 3)[0]
    bottleneck = opts.stages(start)[4].min()
    raised = [opts.stages(row)[4].min() > bottleneck for row in level_moves(opts, start)]
    assert sum(raised) >= len(raised) // 2


def _descents(seed: int, variants: dict) -> tuple[float, dict[str, float]]:
    """(optimum, best cost reached per variant): descent with one-move and split moves plus
    each variant's compound moves (a function of StageOptions), from the same 4 starts."""
    problem = _far_above_limit(seed)
    space = SearchSpace(problem)
    best = float(evaluate_assignments(problem, exact_assignment(problem)[None, :]).cost_usd[0])
    starts = space.sample(np.random.default_rng(0), 4, 3)
    opts = StageOptions(space)
    reached = {}
    for name, moves in variants.items():
        budget = PlanBudget(problem, Evaluator(problem), None)
        reached[name] = min(descend(space, budget, s, 100, 2, True, moves(opts))[1]
                            for s in starts)
    return best, reached


def _levels(opts):
    return (lambda a: level_moves(opts, a),)


@pytest.mark.parametrize("seed", [137, 225])
def test_level_moves_reach_the_optimum_the_one_move_polish_misses(seed):
    # Found by search over seeds: from these 4 starts, descent with one-move and split moves
    # stops 10-34% above the optimum; with the level moves it reaches it.
    best, reached = _descents(seed, {"old": lambda opts: (), "levels": _levels})
    assert reached["old"] > best * 1.05
    assert reached["levels"] == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("seed", [65, 74])
def test_window_moves_reach_the_optimum_the_level_moves_miss(seed):
    # Found by search over seeds: from these 4 starts, descent with one-move, split and level
    # moves stops 1-6% above the optimum; with the window moves too it reaches it.
    best, reached = _descents(seed, {
        "levels": _levels,
        "window": lambda opts: _levels(opts) + (lambda a: window_moves(opts, a, 2),)})
    assert reached["levels"] > best * 1.01
    assert reached["window"] == pytest.approx(best, rel=1e-9)


def test_rl_options_turn_the_compound_moves_off_and_stay_deterministic():
    problem = _far_above_limit(225)
    runs = {name: run_scheduler(make_scheduler("rl", updates=0, **opts), problem)
            for name, opts in (("default", {}), ("again", {}),
                               ("off", dict(polish_levels=False, polish_window=0)),
                               ("shipped only", dict(untrained_starts=False)))}
    assert runs["default"].result.cost_usd == runs["again"].result.cost_usd
    assert runs["default"].plan == runs["again"].plan
    assert runs["default"].evaluations > runs["off"].evaluations  # more plans costed
    assert runs["default"].result.cost_usd <= runs["off"].result.cost_usd * (1 + 1e-9)
    # the untrained policy's decode is polished too: more plans, never a dearer result
    assert runs["default"].evaluations > runs["shipped only"].evaluations
    assert runs["default"].result.cost_usd <= runs["shipped only"].result.cost_usd * (1 + 1e-9)
