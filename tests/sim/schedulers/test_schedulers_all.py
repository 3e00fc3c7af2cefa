"""Every registered scheduler against the contract, on the same problems.

For each name in the registry, on small random problems (half of them capped), on
scenarios/exec-tiny.yaml and scenarios/wide-deep-capped.yaml, in both provisioning modes:
the plan covers the layers in order on known types, meets the throughput limit within the
caps, and never costs less than the exact optimum. NoFeasiblePlan is allowed only when the
exact scheduler finds no plan either, or for schedulers that search a restricted set of plans
(single-type, Paddle's rule). Same config (seed), same plan. Effort is kept small so the
whole file runs in seconds: QUICK sets each of its options that a scheduler's Config has
(an evaluation `budget`; RL training `updates`, which also makes its plan reproducible).
In one problem the caps bind (set at half the units the uncapped optimum uses: 193 of its
2,304 plans are feasible), so the searches must work for feasibility too.
"""

import dataclasses
import functools
import math
from pathlib import Path

import numpy as np
import pytest

from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.schedulers.registry import make_scheduler, scheduler_class, scheduler_names
from heterps_sim.testing import random_default_problem, random_problem

ROOT = Path(__file__).resolve().parents[3]
MODES = ("least", "exact")
RESTRICTED = {"homogeneous", "cpu-only", "gpu-only", "paddle-heuristic", "exact-flushed"}
"""Schedulers that only consider some plans: they may find none where the optimum exists
(exact-flushed: plans that meet the limit as their flushed schedule runs, default model)."""
OWN_UNITS = {"exact-flushed"}
"""Schedulers whose plans fix every stage's units and may cut a run of one type into several
stages: their bound is the exact optimum over such plans (exact mode, same-type cuts)."""
QUICK = {"budget": 400, "updates": 20, "train_seconds": 60.0}
"""Small-effort options, applied where a scheduler's Config has the field."""
QUICK_FOR = {"bayesian": {"budget": 100}, "rl": {"updates": 4, "decode_samples": 64}}
"""Per-scheduler exceptions (TPE's own cost grows with every trial)."""


def _binding_caps(problem):
    """Caps at half the units the uncapped optimum uses on each of its types."""
    plan = make("exact").schedule(problem, Evaluator(problem))
    caps = list(problem.available)
    for name, units in evaluate_plan(problem, plan).units_per_type.items():
        caps[problem.type_index(name)] = max(1, units // 2)
    return dataclasses.replace(problem, available=tuple(caps))


def _problems() -> list:
    rng = np.random.default_rng(404)
    out = [(f"random {n_l}x{n_t}{' capped' if caps else ''}", random_problem(rng, n_l, n_t, caps=caps))
           for n_l, n_t, caps in [(3, 2, False), (4, 3, True), (5, 3, False), (6, 4, True)]]
    out.append(("random 6x4, caps that bind", _binding_caps(
        random_problem(np.random.default_rng(405), 6, 4, limit_quantile=3.0))))
    out.append(("random 5x3, no plan reaches the limit",
                random_problem(rng, 5, 3, limit_quantile=1e6)))
    rng_default = np.random.default_rng(406)  # the default cost model (all-reduce, memory, PS...)
    out += [(f"default model {n_l}x{n_t}", random_default_problem(rng_default, n_l, n_t, caps=caps))
            for n_l, n_t, caps in [(4, 3, False), (5, 3, True)]]
    for name in ("exec-tiny", "wide-deep-capped"):
        out.append((name, load_input(ROOT / f"scenarios/{name}.yaml").problem))
    return out


def make(name: str):
    fields = scheduler_class(name).Config.model_fields
    options = {k: v for k, v in {**QUICK, **QUICK_FOR.get(name, {})}.items() if k in fields}
    return make_scheduler(name, **options)


PROBLEMS = _problems()


@functools.cache
def exact_cost(index: int, mode: str) -> float:
    problem = PROBLEMS[index][1]
    try:
        plan = make("exact").schedule(problem, Evaluator(problem, mode))
    except NoFeasiblePlan:
        return math.inf
    return evaluate_plan(problem, plan, mode).cost_usd


@functools.cache
def own_units_bound(index: int) -> float:
    """The stage model's exact optimum over every plan and unit count (same-type cuts too)."""
    problem = PROBLEMS[index][1]
    exact = make_scheduler("exact", allow_same_type_cuts=True)
    try:
        plan = exact.schedule(problem, Evaluator(problem, "exact"))
    except NoFeasiblePlan:
        return math.inf
    return evaluate_plan(problem, plan, "exact").cost_usd


def check_plan(name: str, label: str, problem, plan, mode: str, best: float) -> None:
    assert not plan.problems(problem.layer_names, problem.type_names), (name, label)
    result = evaluate_plan(problem, plan, mode)
    assert result.feasible, (name, label, result.reason)
    assert result.throughput >= problem.throughput_limit * (1 - 1e-12)
    for type_name, units in result.units_per_type.items():
        cap = problem.available[problem.type_index(type_name)]
        assert cap is None or units <= cap, (name, label, type_name, units, cap)
    assert result.cost_usd >= best * (1 - 1e-9), (name, label, result.cost_usd, best)


@pytest.mark.parametrize("name", scheduler_names())
def test_valid_feasible_and_never_below_the_optimum(name):
    solved = 0
    for index, (label, problem) in enumerate(PROBLEMS):
        for mode in MODES:
            best = exact_cost(index, mode)
            try:
                plan = make(name).schedule(problem, Evaluator(problem, mode))
            except NoFeasiblePlan as exc:
                assert str(exc), name
                assert best == math.inf or name in RESTRICTED, (name, label, mode, str(exc))
                continue
            assert math.isfinite(best), (name, label, "a plan where exact finds none")
            if name in OWN_UNITS:
                best = own_units_bound(index)
            check_plan(name, label, problem, plan, mode, best)
            solved += 1
    assert solved >= 1 or name in RESTRICTED, name


@pytest.mark.parametrize("name", scheduler_names())
def test_deterministic_per_seed(name):
    label, problem = PROBLEMS[3]
    outcomes = []
    for _ in range(2):
        try:
            outcomes.append(make(name).schedule(problem, Evaluator(problem)))
        except NoFeasiblePlan as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1], (name, label)
