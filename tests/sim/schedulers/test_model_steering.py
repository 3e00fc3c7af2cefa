"""The schedulers that estimate before they cost (search moves and scores, the RL features and
reward shaping) estimate with the problem's own cost model (cost/provision.py), and every
scheduler reports, on a default-model problem, the numbers cost.evaluate_plan gives its plan.

The oracle for the estimates is the reference's StageTerms (cost/terms.py), stage for stage.
The steering case: two layers, a cheap slow type whose units must all-reduce 1 GB of dense
parameters every step, and a fast dear one. HeterPS's formulas, blind to the all-reduce, steer
to the cheap type; the default model's see that no number of its units reaches the limit.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from heterps_sim.core.plan import plan_from_assignment
from heterps_sim.core.problem import Problem
from heterps_sim.cost.provision import provision
from heterps_sim.cost.reference import evaluate_plan, stage_terms
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler, scheduler_names
from heterps_sim.schedulers.rl.paper.features import encode
from heterps_sim.schedulers.rl.reward import reach
from heterps_sim.schedulers.rl.stagewise.segments import encode_segments
from heterps_sim.schedulers.search.level_moves import StageOptions
from heterps_sim.schedulers.search.space import SearchSpace, shortfall
from heterps_sim.testing import random_default_problem

ROOT = Path(__file__).resolve().parents[3]
QUICK = {"budget": 300, "updates": 2, "train_seconds": 30.0, "decode_samples": 32}


@pytest.mark.parametrize("model", ["default", "paper"])
def test_provision_is_the_reference_stage_for_stage(model):
    rng = np.random.default_rng(31)
    checked = 0
    for _ in range(12):
        p = random_default_problem(rng, int(rng.integers(2, 8)), int(rng.integers(2, 5)))
        p = p.with_model(model)
        step_budget = p.batch_size / p.throughput_limit
        for _ in range(15):
            first = int(rng.integers(p.num_layers))
            last = int(rng.integers(first, p.num_layers))
            j = int(rng.integers(p.num_types))
            nxt = int(rng.integers(-1, p.num_types)) if last < p.num_layers - 1 else -1
            if not p.runnable[first:last + 1, j].all():
                continue
            t = stage_terms(p, first, last, j, nxt)
            got = provision(p, t.parallel_s, t.serial_s, t.alpha, first, last, j, step_budget)
            k = t.least_units(p.batch_size, p.throughput_limit)
            assert bool(got.ok) == (k is not None)
            if k is not None:
                assert got.units == k and got.step_s == t.exec_time(k)
            assert got.fastest_s == t.min_exec_time()
            checked += 1
    assert checked > 60


def test_search_moves_price_stages_as_the_reference():
    rng = np.random.default_rng(8)
    p = random_default_problem(rng, 6, 4)
    opts = StageOptions(SearchSpace(p))
    lo, hi = np.array([0, 1, 2, 3]), np.array([2, 4, 6, 6])
    nxt = np.array([1, 0, -1, -1])
    rate, thr = opts.table(lo, hi, nxt)
    for c in range(len(lo)):
        for j in range(p.num_types):
            if nxt[c] == j or not p.runnable[lo[c]:hi[c], j].all():
                continue
            t = stage_terms(p, int(lo[c]), int(hi[c] - 1), j, int(nxt[c]))
            k = t.least_units(p.batch_size, p.throughput_limit)
            if k is None:
                assert rate[c, j] == math.inf and thr[c, j] == 0.0
            else:
                assert rate[c, j] == p.price_per_hour[j] * k
                # prefix sums here, sequential sums there: the same up to rounding
                assert thr[c, j] == pytest.approx(p.batch_size / t.exec_time(k), rel=1e-12)


@pytest.fixture(scope="module")
def allreduce_toy() -> Problem:
    L, M = 2, 2
    p = Problem(
        name="allreduce-toy", batch_size=256, throughput_limit=256 / 0.025, num_samples=1e7,
        oct_s=np.array([[0.04, 0.01], [0.04, 0.01]]), odt_s=np.zeros((L, M)),
        alpha=np.full((L, M), 0.99), odt_parallel=True, boundary_bytes=np.array([1e4, 0.0]),
        network_bytes_per_s=np.array([1.25e9, 1.25e9]), latency_s=5e-5,
        price_per_hour=np.array([1.0, 5.0]), available=(None, None),
        type_names=("cheap-slow", "fast"), layer_names=("l0", "l1"),
        param_bytes=np.array([5e8, 5e8]), cost_model="default")
    return dataclasses.replace(p, costs=p.unit_costs)


def test_the_paper_formulas_steer_to_a_plan_the_default_model_refutes(allreduce_toy):
    p, paper = allreduce_toy, allreduce_toy.with_model("paper")
    cheap, fast = np.array([0, 0]), np.array([1, 1])
    # the truth (the default model): the cheap type's all-reduce misses the limit
    assert not evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, cheap)).feasible
    assert evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, fast)).feasible
    for problem, steered in ((paper, 0), (p, 1)):
        # search moves: the cheapest type for the whole model as one stage
        rate, _ = StageOptions(SearchSpace(problem)).table(np.array([0]), np.array([2]),
                                                           np.array([-1]))
        assert int(np.argmin(rate[0])) == steered
        # RL (paper): which types meet the limit with the layer alone
        assert encode(problem).types[0, :, 4].tolist() == ([1.0, 1.0] if steered == 0 else
                                                           [0.0, 1.0])
        # RL (stagewise): the whole model as one stage on each type
        assert encode_segments(problem).ok[0, 1].tolist() == [steered == 0, True]
    # search scores and the RL reward's shaping grade the cheap plan infeasible by the model
    rows = np.array([cheap, fast])
    assert shortfall(p, rows)[0] > 1.0 >= shortfall(paper, rows)[0]
    assert reach(p, rows)[0] < p.throughput_limit <= reach(paper, rows)[0]


def _default_problem(which: str) -> Problem:
    if which == "random":
        return random_default_problem(np.random.default_rng(406), 5, 3)
    return load_input(ROOT / "scenarios/exec-tiny.yaml").problem


@pytest.mark.parametrize("which", ["random", "exec-tiny"])
@pytest.mark.parametrize("name", scheduler_names())
@pytest.mark.parametrize("mode", ["least", "exact"])
def test_reported_numbers_are_the_default_model_s(name, mode, which):
    """On a default-model problem the plan each scheduler returns is costed by the default
    model, and the costs its notes report for that plan are evaluate_plan's."""
    p = _default_problem(which)
    assert p.cost_model == "default"
    cls = make_scheduler(name).Config.model_fields
    options = {k: v for k, v in QUICK.items() if k in cls}
    out = run_scheduler(make_scheduler(name, **options), p, mode)
    if out.result is None:
        pytest.skip(f"{name}: no plan ({out.notes['reason']})")
    ref = evaluate_plan(p, out.plan, mode)
    assert (out.result.cost_usd, out.result.throughput) == (ref.cost_usd, ref.throughput)
    for key in ("predicted_cost_usd", "best_cost_usd", "analytic_cost_usd"):
        if key in out.notes and ref.feasible:
            assert out.notes[key] == pytest.approx(ref.cost_usd, rel=1e-12), key
