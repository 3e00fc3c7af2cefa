"""Every command prints the same cost for the same plan: schedule, simulate, evaluate,
compare, tradeoff (one point at the scenario's limit), the report's headline table and the
Python planner all price the answer through the one Pricing."""

import json
import math

import pandas as pd
import pytest

from heterps_sim.cli import main
from heterps_sim.inputs.load import load_input
from heterps_sim.planner import Planner
from heterps_sim.studies.report import _outcomes, headline_row

SCENARIO = "scenarios/nce-cpu-gpu.yaml"


def run_json(argv, capsys):
    code = main([*argv, "--json"])
    out, _ = capsys.readouterr()
    assert code in (0, 1), out
    return json.loads(out)


@pytest.fixture(scope="module")
def answer():
    problem = load_input(SCENARIO).problem
    return problem, Planner().plan(problem)


def test_every_command_prints_the_answers_cost(answer, capsys, tmp_path):
    problem, ours = answer
    assert ours.feasible
    usd = ours.cost_usd
    plan_path = tmp_path / "plan.json"

    got = run_json(["schedule", SCENARIO, "--verify", "none", "--out", str(plan_path)], capsys)
    assert got["result"]["cost_usd"] == pytest.approx(usd, rel=1e-12)

    sim = run_json(["simulate", SCENARIO, "--verify", "none", "--out", str(tmp_path / "run")],
                   capsys)
    assert sim["result"]["cost_usd"] == pytest.approx(usd, rel=1e-12)

    evaluated = run_json(["evaluate", SCENARIO, str(plan_path)], capsys)
    assert evaluated["cost_usd"] == pytest.approx(usd, rel=1e-12)

    rows = run_json(["compare", SCENARIO, "--schedulers", "exact"], capsys)
    assert rows[0]["cost_usd"] == pytest.approx(usd, rel=1e-12)

    limit = problem.throughput_limit
    out = tmp_path / "sweep"
    assert main(["tradeoff", SCENARIO, "--schedulers", "exact", "--points", "1",
                 "--limits", f"{limit}:{limit}", "--out", str(out)]) == 0
    capsys.readouterr()
    frame = pd.read_csv(out / "tradeoff.csv")
    assert frame["cost_usd"].iloc[0] == pytest.approx(usd, rel=1e-9)

    row = headline_row("nce", problem, _outcomes(problem))
    assert row["ours_usd"] == pytest.approx(usd, rel=1e-12)


def test_the_baseline_is_the_one_type_optimum_under_the_same_pricing(answer):
    """The one-type baseline is never dearer than the best one-stage plan, and the answer
    never dearer than the one-type baseline (it searches a superset)."""
    from heterps_sim.planner.baseline import one_type_baselines
    problem, ours = answer
    base = one_type_baselines(ours.problem, ours.pricing)
    assert base.one_type is not None and base.one_stage is not None
    assert base.one_type.cost_usd <= base.one_stage.cost_usd * (1 + 1e-9)
    if ours.proven:
        assert ours.cost_usd <= base.one_type.cost_usd * (1 + 1e-9)
    types = {s.resource for s in base.one_type.result.stages}
    assert len(types) == 1
    assert math.isfinite(base.one_type.cost_usd)
