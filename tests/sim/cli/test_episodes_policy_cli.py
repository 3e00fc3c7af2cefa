"""`heterps-sim episodes --policy`: the learned spot policy's decisions beside the plan's jobs."""

import json
import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "heterps_sim.cli"]
TINY = "scenarios/exec-tiny.yaml"
MARKET = "scenarios/markets/exec-tiny-spot.yaml"


def _run(*args):
    return subprocess.run([*CLI, "episodes", TINY, "--market", MARKET, *args],
                          capture_output=True, text=True, timeout=600)


def test_the_policys_decisions_are_priced_by_the_same_jobs_as_a_plan_alone():
    from heterps_sim.core.plan import plan_from_dict
    from heterps_sim.inputs.load import load_input
    from heterps_sim.inputs.market import load_market
    from heterps_sim.planner.episodes import rental_episodes
    from heterps_sim.planner.learned.decide import sub_market

    proc = _run("--seeds", "4", "--policy", "shipped", "--policy-samples", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["policy"]
    assert 1 <= out["decisions_tried"] <= 5  # the alone decision, the likeliest, 3 samples
    problem = load_input(TINY).problem
    market = load_market(MARKET, list(problem.type_names))
    for key in ("alone", "searched"):
        d = out[key]["decision"]
        assert set(d["spot"]) <= set(market.spot)
        # the oracle: the printed plan rented as the decision says, through rental_episodes
        again = rental_episodes(problem, plan_from_dict(out[key]["plan"]),
                                sub_market(market, d["spot"]), seeds=4, reference=False,
                                checkpoint_scale=d["checkpoint_scale"])
        assert out[key]["jobs"]["cost_usd"]["mean"] == pytest.approx(again.cost.mean,
                                                                     rel=1e-12)
    # the search scores the most likely decision too: never dearer when that one holds
    assert out["alone"]["jobs"]["meets_probability"]
    assert out["searched"]["jobs"]["cost_usd"]["mean"] <= \
        out["alone"]["jobs"]["cost_usd"]["mean"] + 1e-12


def test_a_bad_policy_checkpoint_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "p.pt"
    bad.write_text("nope")
    proc = _run("--seeds", "2", "--policy", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "not a spot-policy checkpoint" in proc.stderr
