"""The search baselines (random, greedy, genetic, bayesian) and Paddle's rule.

Yardstick: the exact scheduler (itself checked against brute force in tests/sim/schedulers/test_exact.py). On
tiny problems, whose whole space (<= 3^5 = 243 assignments) is smaller than the budget,
every search must find the optimum; everywhere, budgets are honest: `evaluate.count` (the
plans costed, batches included) stays within budget + search_space.SLACK.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.schedulers.baselines.bayesian import BayesianScheduler
from heterps_sim.schedulers.baselines.genetic import GeneticScheduler
from heterps_sim.schedulers.baselines.greedy import GreedyScheduler
from heterps_sim.schedulers.baselines.paddle import PaddleHeuristicScheduler, io_layers
from heterps_sim.schedulers.baselines.random_search import RandomSearchScheduler
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.schedulers.search.space import SLACK, PlanBudget, SearchSpace
from heterps_sim.testing import random_problem

ROOT = Path(__file__).resolve().parents[3]
SEARCHES = [RandomSearchScheduler, GreedyScheduler, GeneticScheduler, BayesianScheduler]


def cost_of(scheduler, problem, mode="least") -> float:
    try:
        plan = scheduler.schedule(problem, Evaluator(problem, mode))
    except NoFeasiblePlan:
        return math.inf
    return evaluate_plan(problem, plan, mode).cost_usd


def tiny_problems(count: int, seed: int = 31):
    rng = np.random.default_rng(seed)
    for case in range(count):
        yield random_problem(rng, int(rng.integers(2, 6)), int(rng.integers(2, 4)),
                             caps=case % 2 == 1)


@pytest.mark.parametrize("cls", SEARCHES, ids=lambda c: c.name)
def test_finds_the_exact_optimum_on_tiny_problems(cls):
    found = feasible = 0
    for problem in tiny_problems(6):
        for mode in ("least", "exact"):
            best = cost_of(ExactScheduler(), problem, mode)
            got = cost_of(cls(cls.Config(budget=300, seed=1)), problem, mode)
            assert got == best or got <= best * (1 + 1e-9), (cls.name, mode, got, best)
            assert got >= best * (1 - 1e-9)
            found += 1
            feasible += math.isfinite(best)
    assert feasible >= 6, feasible  # the cases are not all infeasible


@pytest.mark.parametrize("cls", SEARCHES, ids=lambda c: c.name)
def test_budget_is_respected_and_counted(cls):
    problem = random_problem(np.random.default_rng(8), 24, 8, caps=True, limit_quantile=1.0)
    budget = 60 if cls is BayesianScheduler else 700
    for mode in ("least", "exact"):
        scheduler = cls(cls.Config(budget=budget))
        evaluate = Evaluator(problem, mode)
        try:
            scheduler.schedule(problem, evaluate)
        except NoFeasiblePlan:
            pass
        used = scheduler.notes["evaluations"]
        assert used <= budget - 1  # one is kept back to re-check the winner
        assert used >= 0.9 * (budget - 1)  # a 24 x 8 space is not exhausted
        assert used < evaluate.count <= budget + SLACK


@pytest.mark.parametrize("cls", SEARCHES, ids=lambda c: c.name)
def test_deterministic_per_seed(cls):
    problem = random_problem(np.random.default_rng(5), 12, 6, caps=True, limit_quantile=1.5)
    budget = 50 if cls is BayesianScheduler else 500
    plans = [cls(cls.Config(budget=budget, seed=7)).schedule(problem, Evaluator(problem))
             for _ in range(2)]
    assert plans[0] == plans[1]


def test_any_other_evaluator_is_called_plan_by_plan():
    """With a non-analytic evaluator (here a wrapper, standing in for the simulator) the
    search calls it for every plan instead of the batch path, and finds the same plan."""
    problem = random_problem(np.random.default_rng(3), 8, 4, limit_quantile=1.0)
    calls = []

    def wrapped(p, plan, mode):
        calls.append(plan)
        return evaluate_plan(p, plan, mode)

    for cls in (RandomSearchScheduler, GreedyScheduler):
        calls.clear()
        evaluate = Evaluator(problem, "least", fn=wrapped)
        plan = cls(cls.Config(budget=200)).schedule(problem, evaluate)
        assert evaluate.count == len(calls) <= 200
        assert plan == cls(cls.Config(budget=200)).schedule(problem, Evaluator(problem))


def test_search_space_proposes_only_usable_pairs():
    rng = np.random.default_rng(0)
    problem = random_problem(rng, 20, 6, unrunnable=0.4)
    caps = list(problem.available)
    caps[int(np.flatnonzero(problem.runnable.sum(axis=0) > 3)[0])] = 0  # a type with no units
    problem = dataclasses.replace(problem, available=tuple(caps))
    space = SearchSpace(problem)
    usable = problem.runnable & (problem.available_array != 0)
    layers = np.arange(problem.num_layers)
    plans = space.sample(rng, 3000, max_stages=5)
    assert usable[layers, plans].all()
    stages = (plans[:, 1:] != plans[:, :-1]).sum(axis=1) + 1
    assert np.median(stages) <= 8  # stages no type holds whole are split, not scattered
    full = SearchSpace(dataclasses.replace(problem, oct_s=np.ones((20, 6)), odt_s=np.ones(
        (20, 6)), alpha=np.full((20, 6), 0.5), available=(None,) * 6))
    stages = (lambda p: (p[:, 1:] != p[:, :-1]).sum(axis=1) + 1)(full.sample(rng, 3000, 5))
    assert stages.min() == 1 and stages.max() == 5
    for a in plans[:40]:
        near = space.neighbours(a)
        assert usable[layers, near].all() and len(np.unique(near, axis=0)) == len(near)
        assert not (near == a).all(axis=1).any()
        b = space.mutate(rng, a)
        c = space.crossover(rng, a, plans[-1])
        assert usable[layers, b].all() and usable[layers, c].all()


def test_a_layer_with_no_usable_type_is_no_feasible_plan():
    problem = random_problem(np.random.default_rng(1), 4, 3)
    caps = tuple(0 if problem.runnable[2, j] else None for j in range(3))
    problem = dataclasses.replace(problem, available=caps)
    for cls in SEARCHES:
        with pytest.raises(NoFeasiblePlan, match="runs on no resource type that has units"):
            cls(cls.Config(budget=50)).schedule(problem, Evaluator(problem))


def test_infeasible_limit_is_no_feasible_plan_with_a_reason():
    problem = random_problem(np.random.default_rng(2), 6, 3, limit_quantile=1e6)
    for cls in SEARCHES:
        with pytest.raises(NoFeasiblePlan, match=f"{cls.name}: none of the .* plans evaluated"
                                                 " meets the throughput limit.*; e.g. stage"):
            cls(cls.Config(budget=100)).schedule(problem, Evaluator(problem))


def test_plan_budget_never_costs_a_plan_twice():
    problem = random_problem(np.random.default_rng(4), 5, 3)
    evaluate = Evaluator(problem)
    budget = PlanBudget(problem, evaluate, 10)
    plans = np.array([[0] * 5, [1] * 5, [0] * 5, [2] * 5])
    assert len(budget.scores(plans)) == 4 and budget.used == evaluate.count == 3
    assert len(budget.scores(plans)) == 4 and budget.used == 3
    many = SearchSpace(problem).sample(np.random.default_rng(0), 100, 5)
    assert len(budget.scores(many)) < 100 and budget.used == 9  # capacity = budget - 1


def test_genetic_config_rejects_an_elite_as_large_as_the_population():
    with pytest.raises(ValidationError, match="elite"):
        GeneticScheduler.Config(population=4, elite=4)


# -- Paddle's rule ---------------------------------------------------------------------
def two_emb():
    problem = load_input(ROOT / "scenarios/2emb-aws.yaml").problem
    return problem.with_limit(problem.throughput_limit / 10)  # the rule misses the full limit


def test_paddle_puts_embedding_and_input_on_a_cpu_and_dense_layers_on_a_gpu():
    problem = two_emb()
    scheduler = PaddleHeuristicScheduler()
    plan = scheduler.schedule(problem, Evaluator(problem))
    kind = {s: problem.type_kinds[problem.type_index(st.resource)]
            for st in plan.stages for s in st.layers}
    emb = {n for n, b in zip(problem.layer_names, problem.sparse_bytes) if b > 0}
    assert emb == {"emb_0", "emb_1"}
    for name in problem.layer_names:
        assert kind[name] == ("cpu" if name in emb | {"input"} else "gpu"), name
    assert len({st.resource for st in plan.stages}) == 2
    assert scheduler.notes["io_layers"] == ["input", "emb_0", "emb_1"]


def test_paddle_keeps_the_cheapest_feasible_cpu_gpu_pair():
    problem = two_emb()
    plan = PaddleHeuristicScheduler().schedule(problem, Evaluator(problem))
    got = evaluate_plan(problem, plan).cost_usd
    costs = []
    for c in np.flatnonzero(np.array(problem.type_kinds) == "cpu"):
        for g in np.flatnonzero(np.array(problem.type_kinds) == "gpu"):
            stages = (Stage(layers=problem.layer_names[:3], resource=problem.type_names[c]),
                      Stage(layers=problem.layer_names[3:], resource=problem.type_names[g]))
            costs.append(evaluate_plan(problem, Plan(stages=stages)).cost_usd)
    assert got == pytest.approx(min(costs), rel=1e-12)
    assert got >= cost_of(ExactScheduler(), problem) * (1 - 1e-9)


def test_paddle_at_the_full_limit_says_why_it_fails():
    """The paper model at 2EMB's paper-era limit of 4 M samples/s (scenarios/2emb-aws.yaml)."""
    problem = load_input(ROOT / "scenarios/2emb-aws.yaml", "paper").problem.with_limit(4e6)
    with pytest.raises(NoFeasiblePlan, match=r"embedding / IO on a CPU.*cannot reach 4e\+06"):
        PaddleHeuristicScheduler().schedule(problem, Evaluator(problem))


def test_paddle_without_sparse_bytes_goes_by_transfer_versus_compute():
    problem = random_problem(np.random.default_rng(9), 10, 4)
    io = io_layers(problem)
    run = problem.runnable
    want = np.where(run, problem.odt_s, 0).sum(1) > np.where(run, problem.oct_s, 0).sum(1)
    assert (io == want).all()
    scheduler = PaddleHeuristicScheduler()
    try:
        plan = scheduler.schedule(problem, Evaluator(problem))
    except NoFeasiblePlan:
        return
    kinds = [problem.type_kinds[problem.type_index(st.resource)]
             for st in plan.stages for _ in st.layers]
    usable = [np.flatnonzero(run[i]) for i in range(problem.num_layers)]
    for i, k in enumerate(kinds):  # its side's kind unless the pair's type cannot hold it
        assert k == ("cpu" if io[i] else "gpu") or len(usable[i]) < problem.num_types
