"""Mixed-type stages: plan format 2, the finish-together cost model, provisioning, the DES.

Oracles: the closed form against a linear program (HiGHS) for the best split of a batch among
unequal units, and against the simulator with its effects off; the mixed provisioning
against brute force over every composition of a tiny problem's stages.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.optimize import linprog

from heterps_sim.cli import main
from heterps_sim.core.plan import Plan, Stage, plan_from_dict
from heterps_sim.core.problem import Problem
from heterps_sim.core.sharing import CAP, finish_together
from heterps_sim.cost.reference import evaluate_plan, stage_terms
from heterps_sim.des import DesOptions, simulate
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.exact.mixed import provision_split
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.testing import random_problem


def _lp_step_time(serial, parallel, units, cap):
    """min T s.t. c_j + a_j x_j <= T (every unit works its serial part), sum n_j x_j = 1,
    0 <= x_j <= cap / K. Variables (x_1..x_M, T)."""
    m, k = len(units), sum(units)
    cost = np.r_[np.zeros(m), 1.0]
    a_ub = np.c_[np.diag(parallel), -np.ones(m)]
    res = linprog(cost, A_ub=a_ub, b_ub=-np.array(serial), A_eq=[list(units) + [0.0]], b_eq=[1.0],
                  bounds=[(0, cap / k)] * m + [(None, None)], method="highs")
    assert res.status == 0
    return res.x[-1]


@pytest.mark.parametrize("seed", range(40))
def test_finish_together_matches_the_linear_program(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 4))
    serial = rng.uniform(0, 1, m) * (rng.random(m) < 0.8)
    parallel = rng.lognormal(0, 1, m)
    units = rng.integers(1, 5, m).tolist()
    t, shares = finish_together(list(serial), list(parallel), units)
    assert t == pytest.approx(_lp_step_time(serial, parallel, units, CAP), rel=1e-9, abs=1e-12)
    assert sum(n * x for n, x in zip(units, shares)) == pytest.approx(1.0)
    assert all(x <= CAP / sum(units) * (1 + 1e-12) for x in shares)


def test_finish_together_closed_form_and_one_type():
    c, a, n = [0.1, 0.3], [1.0, 2.5], [2, 3]
    closed = (1 + sum(nj * cj / aj for nj, cj, aj in zip(n, c, a))) / sum(nj / aj for nj, aj in zip(n, a))
    assert finish_together(c, a, n)[0] == pytest.approx(closed, rel=1e-12)
    rng = np.random.default_rng(1)
    p = random_problem(rng, 3, 2)
    t = stage_terms(p, 0, 2, 0, -1)
    for k in (1, 2, 7):
        c1, a1 = (1 - t.alpha) * t.parallel_s + t.serial_s, t.alpha * t.parallel_s
        assert finish_together([c1], [a1], [k])[0] == pytest.approx(t.exec_time(k), rel=1e-12)


def test_plan_format_2_round_trip_and_v1_upgrade(tmp_path, capsys):
    plan = Plan(stages=(Stage(layers=("a",), replicas=(("v100", 2), ("t4", 1))),
                        Stage(layers=("b",), resource="t4")))
    data = json.loads(json.dumps(plan.to_json_dict()))
    assert data["format_version"] == 2
    assert data["stages"][0]["replicas"] == [{"resource": "v100", "count": 2},
                                             {"resource": "t4", "count": 1}]
    back = plan_from_dict(data)
    assert back == plan and back.stages[0].label == "2xv100+1xt4"
    assert back.stages[0].resource == "v100" and back.stages[0].num_replicas == 3
    assert back.stages[0].replica_types == ("v100", "v100", "t4")
    assert Stage(layers=("a",), replicas=(("t4", 2),)) == Stage(layers=("a",), resource="t4",
                                                                 num_replicas=2)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format_version": 1, "stages": [{"layers": ["a"], "resource": "t4"}]}))
    new = tmp_path / "new.json"
    assert main(["convert-plan", str(old), "-o", str(new)]) == 0
    assert json.loads(new.read_text())["format_version"] == 2
    assert plan_from_dict(json.loads(new.read_text())) == plan_from_dict(json.loads(old.read_text()))


def _two_type_problem(**over) -> Problem:
    """One layer, types A (1 s/batch) and B (2 s/batch), 0.1 s serial each (alpha = 1, odt
    serial): a mixed stage of one A and one B takes 0.1 + 1 / (1/1 + 1/2) = 0.7667 s."""
    fields = dict(
        name="two", batch_size=300, throughput_limit=1.0, num_samples=3e5,
        oct_s=np.array([[1.0, 2.0]]), odt_s=np.array([[0.1, 0.1]]), alpha=np.array([[1.0, 1.0]]),
        odt_parallel=False, boundary_bytes=np.array([0.0]), network_bytes_per_s=np.array([1e9, 1e9]),
        latency_s=0.0, price_per_hour=np.array([3.0, 1.0]), available=(None, None),
        type_names=("A", "B"), layer_names=("l0",))
    fields.update(over)
    return Problem(**fields)


def test_analytic_mixed_stage_cost_and_units():
    p = _two_type_problem()
    plan = Plan(stages=(Stage(layers=("l0",), replicas=(("A", 1), ("B", 1))),))
    r = evaluate_plan(p, plan)
    assert r.step_time_s == pytest.approx(0.1 + 2 / 3)
    assert r.cost_per_hour == pytest.approx(4.0)
    assert r.units_per_type == {"A": 1, "B": 1} and r.provisioning == "fixed"
    assert r.stages[0].replicas == (("A", 1), ("B", 1))
    capped = _two_type_problem(available=(1, 0))
    bad = evaluate_plan(capped, plan)
    assert not bad.feasible and "type B: plan needs 1 units, 0 available" in bad.reason


@pytest.mark.parametrize("share, m, expected", [("speed", 3, 0.1 + 2 / 3), ("speed", 30, 0.1 + 2 / 3),
                                                ("equal", 2, 1.1)])
def test_des_mixed_stage_matches_the_closed_form(share, m, expected):
    """Effects off but the flush (share=speed needs one): a one-stage gpipe step is the
    slowest replica's microbatches plus its serial part. Speed: 2 microbatches of every 3 go
    to A, all finish at 0.1 + 2/3 (the analytic step time); equal: B takes half, 1.1 s."""
    p = _two_type_problem()
    plan = Plan(stages=(Stage(layers=("l0",), replicas=(("A", 1), ("B", 1))),))
    opts = DesOptions(schedule="gpipe", effects="bubbles", num_microbatches=m, num_steps=4,
                      warmup_steps=1, share=share)
    run = simulate(p, plan, options=opts)
    assert run.result.step_time_s == pytest.approx(expected, rel=1e-12)
    assert run.result.cost_per_hour == pytest.approx(4.0)
    if share == "speed":
        assert run.result.step_time_s == pytest.approx(evaluate_plan(p, plan).step_time_s, rel=1e-12)


def _brute_force(problem: Problem, spans, bound: int):
    """Least USD/h (then fewest units) over every composition of every stage, by heterps_sim/cost/reference.py."""
    types = range(problem.num_types)
    per_stage = [[c for c in itertools.product(range(bound + 1), repeat=problem.num_types) if any(c)]
                 for _ in spans]
    best = None
    for combo in itertools.product(*per_stage):
        stages = []
        for (first, last, primary), counts in zip(spans, combo):
            order = [primary] + [j for j in types if j != primary]
            groups = tuple((problem.type_names[j], counts[j]) for j in order if counts[j])
            stages.append(Stage(layers=problem.layer_names[first:last + 1], replicas=groups))
        r = evaluate_plan(problem, Plan(stages=tuple(stages)))
        if r.feasible:
            key = (round(r.cost_per_hour, 9), sum(map(sum, combo)))
            best = key if best is None or key < best else best
    return best


def _leftovers_problem(rng: np.random.Generator) -> Problem:
    """2 layers, 2-3 types of similar speed, 1-3 units each, a limit above what one unit
    reaches (1.5-4x), equal networks (so the boundary rule cannot differ)."""
    m = int(rng.integers(2, 4))
    oct_s = rng.uniform(0.5, 1.5, (2, m))
    return Problem(
        name="leftovers", batch_size=256, throughput_limit=1.0, num_samples=1e6, oct_s=oct_s,
        odt_s=rng.uniform(0.0, 0.1, (2, m)), alpha=rng.uniform(0.8, 0.99, (2, m)),
        odt_parallel=bool(rng.random() < 0.5), boundary_bytes=np.array([1e6, 0.0]),
        network_bytes_per_s=np.full(m, 1e9), latency_s=1e-4,
        price_per_hour=rng.uniform(0.5, 3.0, m), available=tuple(int(rng.integers(1, 4)) for _ in range(m)),
        type_names=tuple(f"t{j}" for j in range(m)), layer_names=("l0", "l1"),
    ).with_limit(float(rng.uniform(1.5, 4.0)) * 256 / 1.2)


@pytest.mark.parametrize("seed", range(10))
def test_mixed_provisioning_matches_brute_force(seed):
    """provision_split's USD/h equals the best of every composition of every stage (or both
    find none), on tiny problems where the caps make mixing pay."""
    rng = np.random.default_rng(100 + seed)
    p = _leftovers_problem(rng)
    num_types = p.num_types
    spans = [(0, 0, 0), (1, 1, int(rng.integers(0, num_types)))]
    comps = provision_split(p, spans, candidates=num_types, max_types=num_types)
    oracle = _brute_force(p, spans, bound=3)
    if oracle is None:
        assert comps is None
        return
    assert comps is not None
    names = p.type_names
    plan = Plan(stages=tuple(Stage(layers=(p.layer_names[i],),
                                   replicas=tuple((names[j], n) for j, n in comp))
                             for i, comp in enumerate(comps)))
    r = evaluate_plan(p, plan)
    assert r.feasible
    assert (round(r.cost_per_hour, 9), sum(n for c in comps for _, n in c)) == oracle


def test_exact_mixed_reaches_a_limit_single_type_plans_cannot():
    """Under the paper model (under the default one no plan of these leftovers reaches the
    scenario's 1 M samples/s, mixed or not)."""
    problem = load_input("scenarios/mixed-leftovers.yaml", "paper").problem
    single = run_scheduler(make_scheduler("exact"), problem, "least")
    mixed = run_scheduler(make_scheduler("exact", mixed=True), problem, "least")
    assert single.result is None
    assert mixed.result.feasible and mixed.plan.has_mixed
    assert mixed.result.throughput >= problem.throughput_limit
    assert math.isinf(mixed.notes["single_type_cost_usd"])


def test_engine_runs_a_mixed_stage_at_each_types_speed_and_keeps_the_update(tmp_path):
    """Stage 1 = 2 x t4 + 1 x xeon (bound 3x slower): with --share speed the xeon replica
    ends with less than its equal share, and the weights equal single-process training."""
    from tests.exec.helpers import LAYERS, SCENARIO, assert_matches_reference, run_exec
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format_version": 2, "num_microbatches": 6, "schedule": "1f1b",
                                "stages": [{"layers": LAYERS[:10], "resource": "t4", "num_replicas": 1},
                                           {"layers": LAYERS[10:], "replicas": [
                                               {"resource": "t4", "count": 2},
                                               {"resource": "xeon-icelake-16vcpu", "count": 1}]}]}))
    binding = tmp_path / "binding.yaml"
    binding.write_text("types:\n  t4: {device: cpu}\n"
                       "  xeon-icelake-16vcpu: {device: cpu, slowdown: 3.0}\n")
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "5",
                              "--lr", "0.5", "--share", "speed", "--binding", str(binding),
                              "--out", str(tmp_path / "run"), "--save-state",
                              str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["extra"]["replica_slowdowns"] == [[1.0], [1.0, 1.0, 3.0]]
    assert result["units_per_type"] == {"t4": 3, "xeon-icelake-16vcpu": 1}
    assert result["stages"][1]["replicas"] == [["t4", 2], ["xeon-icelake-16vcpu", 1]]
    history = result["extra"]["share_counts"]
    assert history[0][1] == [2, 2, 2] and history[-1][1][2] < 2
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)


@pytest.mark.parametrize("model", ["paper", "default"])
def test_mixed_option_is_never_worse_than_the_single_type_optimum(model):
    """wide-deep-capped under the paper model at its paper-era 6 M samples/s: the single-type
    optimum buys a 29th xeon; 26 xeons + the 2 A100s left over meet the limit for less. The
    mixed option returns the cheaper plan (never a dearer one, under either model)."""
    problem = load_input("scenarios/wide-deep-capped.yaml", model).problem
    if model == "paper":
        problem = problem.with_limit(6e6)
    single = run_scheduler(make_scheduler("exact"), problem, "least")
    mixed = run_scheduler(make_scheduler("exact", mixed=True), problem, "least")
    assert mixed.result.feasible
    assert mixed.result.cost_usd <= single.result.cost_usd * (1 + 1e-12)
    assert mixed.notes["single_type_cost_usd"] == pytest.approx(single.result.cost_usd)
    if model == "paper":
        assert mixed.plan.has_mixed and mixed.result.cost_usd < single.result.cost_usd


def test_cli_shows_mixed_stages_and_simulates_them(capsys, tmp_path):
    plan = "scenarios/plans/exec-tiny-mixed.json"
    assert main(["evaluate", "scenarios/exec-tiny.yaml", plan]) == 0
    assert "2xt4+1xepyc-milan-32vcpu" in capsys.readouterr().out
    trace = tmp_path / "trace.json"
    assert main(["evaluate", "scenarios/exec-tiny.yaml", plan, "--engine", "des",
                 "--trace", str(trace), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["units_per_type"] == {"t4": 2, "epyc-milan-32vcpu": 1}
    assert "replica 2 (epyc-milan-32vcpu)" in trace.read_text()


def test_binding_gives_each_replica_its_types_dilation():
    from heterps_exec.launch.binding import BindingError, BindingFile, TypeBinding, stage_bindings
    from heterps_sim.inputs.catalog import load_catalog
    types = {t.name: t for t in load_catalog()}
    plan = Plan(stages=(Stage(layers=("a",), replicas=(("t4", 2), ("epyc-milan-32vcpu", 1))),))
    emulated = BindingFile(default=TypeBinding(emulate=True))
    (b,) = stage_bindings(emulated, plan, types, "b.yaml", num_gpus=0)
    ratio = types["t4"].peak_flops_fp32 / types["epyc-milan-32vcpu"].peak_flops_fp32
    assert b.emulated and b.replica_slowdowns == pytest.approx((1.0, 1.0, ratio))
    assert [b.slowdown_of(r) for r in range(3)] == pytest.approx([1.0, 1.0, ratio])
    split = BindingFile(types={"t4": TypeBinding(device="cuda:0"), "epyc-milan-32vcpu": TypeBinding()})
    with pytest.raises(BindingError, match="stage 0 mixes types bound to different devices"):
        stage_bindings(split, plan, types, "b.yaml", num_gpus=1)
