"""Trade-off sweeps: the exact optimum's cost along the limit, determinism, the CLI's contract."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from heterps_sim.cli import main
from heterps_sim.core.plan import Plan, Stage, plan_from_dict
from heterps_sim.core.problem import Problem
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.studies.sweep import (
    SweepSpec,
    fast_schedulers,
    log_limits,
    reachable_range,
    run_sweep,
)
from heterps_sim.testing import random_problem


def _exact_costs(problem, num_points: int, mode: str = "exact") -> pd.DataFrame:
    limits = log_limits(*reachable_range(problem, mode), num_points)
    spec = SweepSpec(schedulers=("exact",), limits=limits, mode=mode)
    return run_sweep(problem, spec, progress=False).frame


def _assert_never_decreases(frame: pd.DataFrame) -> None:
    assert frame["feasible"].all(), frame["reason"].tolist()  # every limit up to the reachable
    cost = frame["cost_usd"].to_numpy()
    drops = np.diff(cost) / cost[:-1]
    assert (drops >= -1e-9).all(), f"cost fell by {-drops.min():.3g} relative"


@pytest.mark.parametrize("seed", range(12))
def test_exact_optimum_cost_never_decreases_as_the_limit_rises(seed):
    rng = np.random.default_rng(seed)
    problem = random_problem(rng, int(rng.integers(2, 7)), int(rng.integers(2, 6)),
                             caps=bool(seed % 2))
    _assert_never_decreases(_exact_costs(problem, 15))


@pytest.mark.parametrize("model", ["paper", "default"])
def test_exact_optimum_cost_never_decreases_on_a_shipped_scenario(model):
    problem = load_input("scenarios/dlrm-64types.yaml", model).problem
    frame = _exact_costs(problem, 20)
    _assert_never_decreases(frame)
    if model == "paper":  # the Amdahl wall: units grow without bound near the ceiling (the
        # default model's PS cap ends the range long before, scenarios/dlrm-64types.yaml)
        assert frame["num_units"].iloc[-1] > 100 * frame["num_units"].iloc[0]


def test_least_provisioning_can_make_a_higher_limit_cheaper():
    """Why sweeps default to exact provisioning: under `least`, one plan's bill can fall.

    Two stages, alpha = 1: stage 0 does 100 samples/s per unit at 1 USD/h, stage 1 does 50
    at 0.1 USD/h. At a 40 samples/s floor both get one unit and run at 50 (the slow one);
    at 60, stage 1 gets two units and the pipeline runs at 100: twice as fast for 1.2 vs 1.1
    USD/h, so the workload costs less.
    """
    problem = Problem(batch_size=1, throughput_limit=40.0, num_samples=3.6e5,
                      oct_s=np.array([[0.01], [0.02]]), odt_s=np.zeros((2, 1)),
                      alpha=np.ones((2, 1)), odt_parallel=True, boundary_bytes=np.zeros(2),
                      network_bytes_per_s=np.array([1e9]), latency_s=0.0,
                      price_per_hour=np.array([1.0]), available=(None,), type_names=("t",),
                      layer_names=("a", "b"))
    plan = Plan(stages=(Stage(layers=("a",), resource="t"), Stage(layers=("b",), resource="t")))
    at40 = evaluate_plan(problem, plan, "least")
    at60 = evaluate_plan(problem.with_limit(60.0), plan, "least")
    assert at60.cost_usd < at40.cost_usd
    assert evaluate_plan(problem, plan, "exact").cost_usd <= at60.cost_usd  # exact: monotone


def test_reachable_range_ends_where_the_planner_gives_up():
    # The range is the planner's (the exact search under the flushed pricing): it answers at
    # the top, no plan 0.2% above it, and the cheapest plan's throughput below the bottom.
    from heterps_sim.planner import Planner
    problem = load_input("scenarios/wide-deep-capped.yaml").problem
    lo, hi = reachable_range(problem)
    planner = Planner(search="exact", provisioning="exact")
    top = planner.plan(problem.with_limit(hi))
    assert top.feasible and top.result.throughput >= hi
    assert planner.plan(problem.with_limit(hi * 1.002)).plan is None
    below = planner.plan(problem.with_limit(lo / 10))
    assert below.result.throughput == pytest.approx(lo)  # the cheapest plan: flat below lo


def test_default_schedulers_are_exact_and_the_fast_ones():
    names = fast_schedulers()
    assert names[0] == "exact" and "homogeneous" in names and "greedy" in names
    assert "rl-paper" not in names and "bayesian" not in names


def test_rows_are_the_same_whatever_the_number_of_workers():
    problem = load_input("scenarios/nce-cpu-gpu.yaml").problem
    spec = SweepSpec(schedulers=("exact", "greedy", "paddle-heuristic"),
                     limits=log_limits(5e5, 4e6, 4), budget=300)
    one, two = (run_sweep(problem, spec, jobs=j, progress=False) for j in (1, 2))
    pd.testing.assert_frame_equal(one.frame.drop(columns="wall_s"), two.frame.drop(columns="wall_s"))
    assert one.plans == two.plans
    assert list(one.frame["scheduler"]) == ["exact"] * 4 + ["greedy"] * 4 + ["paddle-heuristic"] * 4


def _cli(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_tradeoff_cli_writes_a_folder_that_reruns_and_repeats(tmp_path, capsys):
    argv = ["tradeoff", "scenarios/exec-tiny.yaml", "--points", "5", "--budget", "200",
            "--schedulers", "exact,homogeneous,greedy,paddle-heuristic"]
    code, out, _ = _cli(argv + ["--out", str(tmp_path / "a")], capsys)
    assert code == 0 and "exec-tiny: 5 limits" in out
    _cli(argv + ["--out", str(tmp_path / "b")], capsys)
    a, b = (pd.read_csv(tmp_path / x / "tradeoff.csv") for x in "ab")
    pd.testing.assert_frame_equal(a.drop(columns="wall_s"), b.drop(columns="wall_s"))
    for col in ("scheduler", "throughput_limit", "feasible", "cost_usd", "throughput", "hours",
                "cost_per_hour", "num_stages", "units", "evaluations", "wall_s"):
        assert col in a
    for name in ("scenario.yaml", "problem.json", "sweep.json", "figures/tradeoff.png",
                 "figures/composition.svg", "figures/ratios.png"):
        assert (tmp_path / "a" / name).is_file(), name
    row = a[a["scheduler"] == "greedy"].iloc[3]  # a point re-runs from the folder alone
    rerun = json.loads((tmp_path / "a" / "sweep.json").read_text())["rerun"]
    rerun = rerun.replace("SCHEDULER", "greedy").replace("LIMIT", repr(float(row["throughput_limit"])))
    _cli(rerun.split()[1:] + ["--out", str(tmp_path / "c")], capsys)
    again = pd.read_csv(tmp_path / "c" / "tradeoff.csv").iloc[0]
    for col in ("throughput_limit", "cost_usd", "throughput", "units", "evaluations"):
        assert again[col] == row[col], col
    problem = load_input(tmp_path / "a" / "problem.json").problem
    for row in a[a["feasible"]].itertuples():  # every saved plan has the row's numbers
        plan = plan_from_dict(json.loads((tmp_path / "a" / row.plan_file).read_text()))
        again = evaluate_plan(problem.with_limit(row.throughput_limit), plan, "exact")
        assert again.cost_usd == pytest.approx(row.cost_usd, rel=1e-9)
        assert (tmp_path / "b" / row.plan_file).read_text() == (tmp_path / "a" / row.plan_file).read_text()


@pytest.mark.parametrize("argv, needle", [
    (["tradeoff", "scenarios/exec-tiny.yaml", "--limits", "abc"], "--limits 'abc'"),
    (["tradeoff", "scenarios/exec-tiny.yaml", "--limits", "5e4:1e4"], "LO <= HI"),
    (["tradeoff", "scenarios/exec-tiny.yaml", "--limits", "0:1e4"], "LO <= HI"),
    (["tradeoff", "scenarios/exec-tiny.yaml", "--schedulers", "exact,nope"], "unknown scheduler 'nope'"),
    (["tradeoff", "scenarios/exec-tiny.yaml", "--points", "0"], "--points"),
    (["tradeoff", "scenarios/exec-tiny.yaml", "--jobs", "0"], "--jobs"),
    (["tradeoff", "scenarios/exec-tiny.yaml", "--effects", "bubbles"], "need --engine des"),
    (["tradeoff", "scenarios/exec-tiny.yaml", "--engine", "des", "--effects", "nope"], "nope"),
    (["tradeoff", "missing.yaml"], "missing.yaml: no such file"),
    (["plot", "no/such/folder"], "no/such/folder: no such folder"),
    (["report", "--scenarios", "nope"], "unknown scenario 'nope'"),
    (["report", "--points", "0"], "--points: expected 1..10,000 limits, got 0"),
])
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys, tmp_path):
    code, out, err = _cli(argv + (["--out", str(tmp_path / "x")] if argv[0] != "plot" else []), capsys)
    assert code == 2 and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_des_engine_reproduces_the_analytic_model_until_effects_are_on(tmp_path, capsys):
    """Under the paper model the simulator with its effects off is the analytic model."""
    problem = load_input("scenarios/nce-cpu-gpu.yaml", "paper").problem
    spec = SweepSpec(schedulers=("exact",), limits=(1e6, 2e6))
    analytic = run_sweep(problem, spec, progress=False).frame
    des = run_sweep(problem, replace(spec, engine="des"), progress=False).frame
    assert (des["engine"] == "des").all() and des["feasible"].all()
    np.testing.assert_allclose(des["throughput"], analytic["throughput"], rtol=1e-6)
    code, _, _ = _cli(["tradeoff", "scenarios/nce-cpu-gpu.yaml", "--schedulers", "exact",
                       "--limits", "1e6:2e6", "--points", "2", "--engine", "des", "--effects",
                       "bubbles,ps", "--model", "paper", "--out", str(tmp_path)], capsys)
    on = pd.read_csv(tmp_path / "tradeoff.csv")
    # effects only add time (the paper's odt has no PS side: the ps effect adds its service)
    assert code == 0 and (on["throughput"] < analytic["throughput"]).all()
    assert json.loads((tmp_path / "sweep.json").read_text())["effects"] == ["bubbles", "ps"]
