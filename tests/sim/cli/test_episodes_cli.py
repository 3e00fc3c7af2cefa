"""`heterps-sim episodes`: the shipped market on exec-tiny, its exit codes and bad input."""

import json
import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "heterps_sim.cli"]
TINY = "scenarios/exec-tiny.yaml"
MARKET = "scenarios/markets/exec-tiny-spot.yaml"


def _run(*args, cwd=None):
    return subprocess.run([*CLI, "episodes", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def test_the_shipped_market_prices_exec_tinys_answer_on_spot_and_on_demand():
    proc = _run(TINY, "--market", MARKET, "--seeds", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["spot_units"] == {"xeon-icelake-16vcpu": 1}
    assert out["meets_probability"] and out["meet"]["mean"] == 1.0
    # the catalog's spot price (0.2964 USD/h) against 0.68 on demand, the same runs
    assert 0.5 < out["savings"] < 0.6
    assert out["on_demand"]["mean_run_hours"] == pytest.approx(out["mean_run_hours"])
    again = json.loads(_run(TINY, "--market", MARKET, "--seeds", "8", "--json").stdout)
    assert again == out  # deterministic


def test_a_market_whose_jobs_miss_the_floor_exits_1(tmp_path):
    market = tmp_path / "m.yaml"
    # a reclaim every ~36 s of a ~9 s job, each costing a 120 s restart: most jobs miss
    market.write_text("spot: {xeon-icelake-16vcpu: {reclaims_per_hour: 100}}\n"
                      "checkpoint: {write_s: 0.003}\n")
    proc = _run(TINY, "--market", str(market), "--seeds", "10")
    assert proc.returncode == 1, proc.stderr
    assert "misses the 90% the market asks" in proc.stdout


@pytest.mark.parametrize("market, words", [
    ("spot: {h100-80gb-sxm: {reclaims_per_hour: 0.1}}\ncheckpoint: {write_s: 1}\n",
     "spot.h100-80gb-sxm: not a type of the scenario"),
    ("spot: {t4: {reclaims_per_hour: -1}}\ncheckpoint: {write_s: 1}\n",
     "spot.t4.reclaims_per_hour"),
    ("spot: {}\n", "checkpoint"),
    ("spot: {xeon-icelake-16vcpu: {reclaims_per_hour: 1.0e6}}\ncheckpoint: {write_s: 1}\n",
     "outpace"),
])
def test_bad_markets_are_one_line_and_exit_2(tmp_path, market, words):
    path = tmp_path / "m.yaml"
    path.write_text(market)
    proc = _run(TINY, "--market", str(path), "--seeds", "2")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(path) in proc.stderr


@pytest.mark.parametrize("args, words", [
    (["--market", "nope.yaml"], "nope.yaml: no such file"),
    (["--market", MARKET, "--seeds", "1"], "--seeds"),
    (["--market", MARKET, "--sweep", "0,-1"], "--sweep"),
])
def test_bad_flags_are_one_line_and_exit_2(args, words):
    proc = _run(TINY, *args)
    assert proc.returncode == 2
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_checkpoints_prints_each_interval_and_holds_when_one_does(tmp_path):
    market = tmp_path / "m.yaml"
    # reclaimed often enough that some jobs miss the floor at one interval and not at others
    market.write_text("spot: {xeon-icelake-16vcpu: {reclaims_per_hour: 100}}\n"
                      "checkpoint: {write_s: 0.003}\n")
    proc = _run(TINY, "--market", str(market), "--seeds", "10", "--checkpoints", "--json")
    out = json.loads(proc.stdout)
    scales = [c["scale"] for c in out["checkpoints"]]
    assert scales == [0.25, 0.5, 1.0, 2.0, 4.0]
    held = [c["jobs"]["meets_probability"] for c in out["checkpoints"]]
    assert proc.returncode == (0 if out["meets_probability"] or any(held) else 1)
    # the same jobs at scale 1 as the plain run
    assert out["checkpoints"][2]["jobs"]["cost_usd"] == out["cost_usd"]
    text = _run(TINY, "--market", str(market), "--seeds", "10", "--checkpoints").stdout
    assert "checkpoint interval, the same jobs at each" in text
    assert ("cheapest holding the floor: " in text) == any(held)


def test_pipeline_async_rents_the_async_answer_and_its_jobs_run_async():
    """--pipeline picks the schedule the planner plans under (the scenario's otherwise): on the
    DLRM scenario the async answer (two H100 stages, no flush) is rented, and its jobs' steps
    are simulated under async: the median step (jitter and stragglers on, which only lengthen
    steps) is shorter than the same plan's step under gpipe with no noise at all (the flushed
    closed form; too slow for the floor, so gpipe's planner never answers it)."""
    from heterps_sim.core.plan import plan_from_dict
    from heterps_sim.inputs.load import load_input
    from heterps_sim.planner import Pricing
    proc = _run("scenarios/dlrm-criteo1tb-aws.yaml", "--market",
                "scenarios/markets/dlrm-criteo1tb-aws-all-spot.yaml", "--seeds", "2", "--json",
                "--pipeline", "async")
    assert proc.returncode in (0, 1), proc.stderr  # (the floor is not held: exit 1)
    run = json.loads(proc.stdout)
    assert run["plan"]["schedule"] == "async"
    assert [s["num_replicas"] for s in run["plan"]["stages"]] == [1, 3]
    p = load_input("scenarios/dlrm-criteo1tb-aws.yaml").problem
    plan = plan_from_dict({**run["plan"], "schedule": "gpipe"})
    _, flushed = Pricing.of(p, schedule="gpipe").price(p, plan)
    assert run["median_step_s"] < p.batch_size / flushed.throughput


def test_a_replay_held_out_from_its_fit_window_says_so(tmp_path):
    # an events trace (ms,add|remove,name): one unit, gone from 1,800 s to 2,400 s in the fit
    # window [0, 3600) and held throughout the replayed part [3600, 7200)
    (tmp_path / "t.csv").write_text("0,add,a\n1800000,remove,a\n2400000,add,b\n"
                                    "7200000,remove,b\n")
    market = tmp_path / "m.yaml"
    market.write_text("spot: {xeon-icelake-16vcpu: {price_per_hour: 0.3, trace: t.csv, "
                      "fit_window_s: [0, 3600], trace_window_s: [3600, 7200]}}\n"
                      "checkpoint: {write_s: 0.003}\n")
    args = (TINY, "--market", str(market), "--seeds", "4", "--sweep", "0")
    proc = _run(*args)
    assert proc.returncode == 0, proc.stderr
    assert "[3600 s, 7200 s), launched at a point of its window drawn per job; rates and " \
           "checkpoint interval fitted on" in proc.stdout
    assert "t.csv [0 s, 3600 s), not on the replay" in proc.stdout
    assert "the Poisson model fitted to the fit window predicts" in proc.stdout
    # the sweep chooses on the fit window and reports its choice on the replayed part
    assert "scored by the same jobs on the part of each trace the planner knows" in proc.stdout
    out = json.loads(_run(*args, "--json").stdout)
    assert out["mean_reclaims"] == 0.0  # the replayed hour never falls below one unit
    rows = out["held_out"]["rows"]
    assert rows[0]["chosen"] and rows[0]["label"] == out["sweep"]["best"]
    assert f"  {rows[0]['label']} (chosen)" in proc.stdout
    best = next(c for c in out["sweep"]["candidates"] if c["label"] == out["sweep"]["best"])
    assert rows[0]["fit_window_cost_usd"] == pytest.approx(best["jobs"]["cost_usd"]["mean"])
    assert rows[0]["replay"]["on_demand"]["cost_usd"]["mean"] > 0

