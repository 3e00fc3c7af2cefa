"""Predicted beside measured (heterps_exec/calibration/prediction.py): the analytic and simulated
predictions of a run, from this host's profile or the roofline, each equal to calling the
model directly; `feasible` is the measurement against the scenario's limit."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from heterps_exec.calibration.prediction import (
    PROFILE_DIRS,
    error_pct,
    find_profile,
    predict,
    prediction_lines,
    with_prediction,
)
from heterps_exec.launch.prepare import prepare
from heterps_exec.request import RunRequest
from heterps_exec.runtime.layout import RunSpec
from heterps_exec.runtime.measure import exec_result, load_ranks
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.des import DesOptions, simulate
from heterps_sim.inputs.load import load_input
from heterps_sim.planner import Pricing
from heterps_sim.planner.check import DETERMINISTIC_EFFECTS
from tests.exec.helpers import SCENARIO, run_exec, tiny_plan

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "traces/profiles/vm-cpu-tiny-ctr.csv"
LINKS = REPO / "traces/profiles/vm-links.json"


def _spec(tmp_path, **request):
    plan = tiny_plan(tmp_path / "plan.json", [9], [2, 1], m=4)
    return prepare(RunRequest(plan=str(plan), scenario=SCENARIO, steps=4,
                              out_dir=str(tmp_path / "run"), **request))


def test_without_a_profile_the_roofline_predicts(tmp_path):
    spec, problem = _spec(tmp_path)
    pred = predict(spec, problem, dirs=[tmp_path / "none"])
    plan = plan_from_dict(spec.plan)
    assert pred.source == "roofline" and pred.profile == ""
    assert pred.analytic.throughput == Pricing.of(problem).price(problem, plan)[1].throughput
    assert pred.analytic.extra["model"] == "flushed"  # the engine's gpipe, as it runs
    options = DesOptions.with_effects(DETERMINISTIC_EFFECTS, num_steps=spec.steps,
                                      warmup_steps=spec.warmup_steps,
                                      num_microbatches=plan.num_microbatches)
    direct = simulate(problem, plan, seed=spec.seed, options=options, record_spans=False)
    assert pred.simulated.throughput == direct.result.throughput


def test_the_hosts_profile_is_used_when_it_exists(tmp_path):
    from heterps_exec.calibration.calibrate import LayerFit, calibrated_problem
    from heterps_exec.calibration.prediction import _profile_rows
    from heterps_exec.model.spec_graph import graph_for
    spec, problem = _spec(tmp_path)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    assert find_profile(spec, "tiny-ctr", host="vm", dirs=[profiles]) is None
    shutil.copy(PROFILE, profiles / "myhost-cpu-tiny-ctr.csv")
    assert find_profile(spec, "tiny-ctr", host="myhost", dirs=[profiles]) is None  # no links
    shutil.copy(LINKS, profiles / "myhost-links.json")
    assert find_profile(spec, "tiny-ctr", host="myhost", dirs=[profiles]) == (
        profiles / "myhost-cpu-tiny-ctr.csv", profiles / "myhost-links.json")
    pred = predict(spec, problem, dirs=[profiles], host="myhost")
    assert pred.source == "profile" and pred.profile.endswith("myhost-cpu-tiny-ctr.csv")
    plan = plan_from_dict(spec.plan)
    links = json.loads(LINKS.read_text())
    fit = LayerFit.from_rows(_profile_rows(PROFILE, "tiny-ctr"))
    calibrated = calibrated_problem(problem, graph_for(spec), plan, fit,
                                    [b.slowdown for b in spec.bindings], links["latency_s"],
                                    links["bytes_per_s"], for_des=False)
    assert pred.analytic.throughput == Pricing.of(calibrated).price(calibrated, plan)[1].throughput
    assert "cores" in pred.effects and "bubbles" in pred.effects
    # another model's profile (here: none of its rows) falls back to the roofline, saying so
    (profiles / "myhost-cpu-tiny-ctr.csv").write_text(PROFILE.read_text().splitlines()[0] + "\n")
    pred = predict(spec, problem, dirs=[profiles], host="myhost")
    assert pred.source == "roofline" and "not used" in pred.notes[0]


def test_auto_quantisation_and_ps_ranks_are_named_in_the_notes(tmp_path):
    spec, problem = _spec(tmp_path, quantize="auto", ps_shards=1)
    pred = predict(spec, problem, dirs=[tmp_path / "none"])
    assert any("--quantize auto" in n for n in pred.notes)
    assert any("--ps-shards 1" in n for n in pred.notes)


def test_error_is_relative_to_the_measurement():
    assert error_pct(110.0, 100.0) == pytest.approx(10.0)
    assert error_pct(90.0, 100.0) == pytest.approx(-10.0)
    assert error_pct(5.0, 0.0) is None


def test_a_run_reports_both_predictions_and_feasibility_against_the_limit(tmp_path):
    """One short engine run (2 ranks, 4 steps) with a limit no run reaches: feasible is
    False; the same measurement against a limit of 1 sample/s is feasible."""
    scenario = tmp_path / "unreachable.yaml"
    scenario.write_text(Path(SCENARIO).read_text().replace("throughput_limit: 20000",
                                                           "throughput_limit: 1.0e+12"))
    plan = tiny_plan(tmp_path / "plan.json", [9], [1, 1], m=2)
    out = tmp_path / "run"
    code, stdout, err = run_exec("run", str(plan), "--scenario", str(scenario), "--steps", "4",
                                 "--out", str(out), "--rank-timeout", "60", "--timeout", "240")
    assert code == 0, err
    result = json.loads((out / "result.json").read_text())
    assert result["feasible"] is False and "below the limit" in result["reason"]
    assert "MISSES the limit" in stdout
    rec = result["extra"]["predicted"]
    measured = result["throughput"]
    for key in ("analytic", "simulator"):
        assert rec[key]["error_pct"] == pytest.approx(
            100 * (rec[key]["throughput"] - measured) / measured, rel=1e-12)
        assert f"{rec[key]['throughput']:,.0f} samples/s" in stdout
    spec = RunSpec.load(out / "spec.json")
    problem = load_input(str(scenario)).problem
    here = find_profile(spec, "tiny-ctr", dirs=PROFILE_DIRS)
    assert rec["source"] == ("profile" if here else "roofline")
    # the same ranks' measurement against a reachable limit
    low = exec_result(spec, replace(problem, throughput_limit=1.0), load_ranks(spec))
    assert low.feasible is True and low.reason == "" and low.throughput == measured
    lines = prediction_lines(with_prediction(low, predict(spec, problem)))
    assert lines[-1].endswith("limit 1: FEASIBLE")


def test_profiles_are_found_here_then_in_the_config_folder_then_shipped(tmp_path, monkeypatch):
    """From any working folder: ./traces/profiles first, then $XDG_CONFIG_HOME/heterps/
    profiles, then the profiles heterps ships (vm-* here, found by host name 'vm')."""
    from heterps_exec.calibration.prediction import profile_dirs
    spec, _ = _spec(tmp_path)
    work, config = tmp_path / "work", tmp_path / "config"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    shipped = find_profile(spec, "tiny-ctr", host="vm")
    assert shipped is not None and shipped[0].name == "vm-cpu-tiny-ctr.csv"
    assert shipped[0].resolve() == PROFILE.resolve()  # the shipped copy: the checkout's here
    mine = config / "heterps" / "profiles"
    mine.mkdir(parents=True)
    shutil.copy(PROFILE, mine / PROFILE.name)
    shutil.copy(LINKS, mine / LINKS.name)
    assert find_profile(spec, "tiny-ctr", host="vm")[0] == mine / PROFILE.name
    here = work / "traces" / "profiles"
    here.mkdir(parents=True)
    shutil.copy(PROFILE, here / PROFILE.name)
    shutil.copy(LINKS, here / LINKS.name)
    assert find_profile(spec, "tiny-ctr", host="vm")[0] == Path("traces/profiles") / PROFILE.name
    assert profile_dirs()[1] == mine
