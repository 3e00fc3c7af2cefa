"""`--model paper` on the shipped scenario reproduces HeterPS's numbers: the paper's odt is the
unit's own transfer, so the parameter server's side of embedding traffic (core/ps_odt.py) is
in the default model's odt_s only. (It was added for both models once: dlrm-64types at the
30 M samples/s limit then cost 19.2 USD under `paper` instead of 3.84.) The paper's numbers
are at the scenario's former batch of 8,192 samples, which its YAML still names."""

from pathlib import Path

import numpy as np

from heterps_sim.core import ps_odt
from heterps_sim.core.files import read_mapping
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.scenario import parse_scenario, scenario_problem
from heterps_sim.schedulers.base import Evaluator
from heterps_sim.schedulers.exact.sweep import ExactScheduler

SCENARIO = "scenarios/dlrm-64types.yaml"


def paper_problem():
    """The scenario as HeterPS's numbers were reproduced: paper model, batch 8,192, 30 M."""
    data = read_mapping(Path(SCENARIO))
    data["workload"].update(batch_size=8192, throughput_limit=30e6)
    data["costs"]["model"] = "paper"
    return scenario_problem(parse_scenario(data, SCENARIO))


def test_dlrm_paper_numbers_on_the_scenario_path():
    assert load_input(SCENARIO).problem.batch_size == 65536  # the scenario's own batch now
    p = paper_problem()
    assert p.cost_model == "paper"
    r = evaluate_plan(p, ExactScheduler().schedule(p, Evaluator(p, "least")))
    assert r.throughput == 30184558.304005284 and r.cost_usd == 3.8399877237214066
    assert [(s.resource, s.num_replicas) for s in r.stages] == [
        ("mi100", 5), ("mi325x", 11), ("mi300x", 14), ("mi325x", 26)]


def test_only_the_default_odt_holds_the_ps_side():
    paper = load_input(SCENARIO, "paper").problem
    default = load_input(SCENARIO).problem
    assert default.cost_model == "default"
    side = ps_odt.ps_side_s(default.sparse_bytes, default.batch_size, default.ps,
                            default.latency_s)
    assert (side > 0).sum() == (default.sparse_bytes > 0).sum() > 0
    assert np.array_equal(np.isnan(paper.odt_s), np.isnan(default.odt_s))
    np.testing.assert_allclose(default.odt_s - paper.odt_s, np.broadcast_to(side[:, None],
                               paper.odt_s.shape), rtol=1e-9, atol=1e-15)
    # switching model on a built problem: exact one way, to rounding the other
    assert np.array_equal(paper.with_model("default").odt_s, default.odt_s, equal_nan=True)
    np.testing.assert_allclose(default.with_model("paper").odt_s, paper.odt_s, rtol=1e-12)
    assert np.array_equal(paper.with_model("paper").odt_s, paper.odt_s, equal_nan=True)


def test_a_problem_without_a_ps_keeps_its_odt_under_both_models():
    from heterps_sim.testing import random_default_problem
    p = random_default_problem(np.random.default_rng(1), 5, 3)
    assert p.ps is None
    assert np.array_equal(p.with_model("paper").odt_s, p.odt_s, equal_nan=True)
