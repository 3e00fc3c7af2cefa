"""`paper` keeps HeterPS's numbers: the dlrm-64types problem (as exported before the default
model, tests/sim/des/data) gives the exact optimum it always gave, to the last digit; the
default model on the same problem prices what the paper leaves out."""

import json
from pathlib import Path

from heterps_sim.core.problem import problem_from_dict
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.schedulers.exact.sweep import ExactScheduler

DATA = Path(__file__).resolve().parents[1] / "des" / "data" / "dlrm-64types.problem.json"


def test_dlrm_paper_optimum_is_unchanged():
    p = problem_from_dict(json.loads(DATA.read_text())).with_model("paper")
    plan = ExactScheduler().schedule(p, Evaluator(p, "least"))
    r = evaluate_plan(p, plan)
    assert r.throughput == 30184558.304005284 and r.cost_usd == 3.8399877237214066
    assert [(s.resource, s.num_replicas) for s in r.stages] == [
        ("mi100", 5), ("mi325x", 11), ("mi300x", 14), ("mi325x", 26)]


def test_dlrm_default_model_refuses_the_paper_limit():
    """30 M samples/s of DLRM's embedding traffic is past the default PS's capacity."""
    p = problem_from_dict(json.loads(DATA.read_text())).with_model("default")
    try:
        ExactScheduler().schedule(p, Evaluator(p, "least"))
    except NoFeasiblePlan as exc:
        assert "parameter server" in str(exc)
    else:
        raise AssertionError("the default model found a plan past the PS capacity")


def test_cli_model_flag_picks_the_model(capsys):
    """--model overrides the input's model; the problem JSON says which one it was built for."""
    from heterps_sim.cli import main

    for model in ("paper", "default"):
        assert main(["problem", "scenarios/exec-tiny.yaml", "--model", model, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["cost_model"] == model
    assert main(["problem", "scenarios/exec-tiny.yaml", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost_model"] == "default"
