"""Calibrated problems and the validation plan set (no processes)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heterps_exec.calibration.calibrate import LayerFit, calibrated_problem
from heterps_exec.calibration.profiler import fit_linear
from heterps_exec.calibration.validate import diverse_plans, kendall_tau, mape
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.zoo import model_graph
from tests.exec.helpers import CPU_TYPE, LAYERS, SCENARIO


def _rows(a=1e-4, c=2e-6, enc=3e-5, dec=2e-5, opt=0.0):
    """A synthetic profile: every layer costs a + c b (split 1:2), encode/decode fixed."""
    return [{"layer": name, "batch_size": b, "forward_s": (a + c * b) / 3,
             "backward_s": 2 * (a + c * b) / 3, "encode_s": enc, "decode_s": dec,
             "optimizer_s": opt} for name in LAYERS for b in (8, 64, 256)]


def test_fit_linear_recovers_fixed_and_per_sample_cost():
    a, c = fit_linear([8, 64, 256], [1e-4 + 2e-6 * b for b in (8, 64, 256)])
    assert a == pytest.approx(1e-4) and c == pytest.approx(2e-6)
    assert fit_linear([10, 10], [1.0, 3.0]) == (0.0, 0.2)


def test_calibrated_one_stage_plan_runs_at_the_profiled_speed():
    base = load_input(SCENARIO).problem
    graph = model_graph("tiny-ctr")
    m, k, slow = 4, 2, 1.5
    plan = Plan(stages=(Stage(layers=tuple(LAYERS), resource=CPU_TYPE, num_replicas=k),),
                num_microbatches=m)
    p = calibrated_problem(base, graph, plan, LayerFit.from_rows(_rows()), [slow], 1e-4, 1e9,
                           for_des=False)
    per_step = slow * len(LAYERS) * (m * 1e-4 + 2e-6 * base.batch_size)
    j = base.type_index(CPU_TYPE)
    assert p.oct_s[:, j].sum() == pytest.approx(per_step)
    assert all(math.isnan(x) for x in p.oct_s[:, 1 - j if j == 0 else 0])
    result = evaluate_plan(p, plan)
    assert result.throughput == pytest.approx(base.batch_size * k / per_step)


def test_parameter_updates_do_not_split_over_replicas():
    base = load_input(SCENARIO).problem
    m, k, u = 2, 3, 5e-5
    plan = Plan(stages=(Stage(layers=tuple(LAYERS), resource=CPU_TYPE, num_replicas=k),),
                num_microbatches=m)
    p = calibrated_problem(base, model_graph("tiny-ctr"), plan,
                           LayerFit.from_rows(_rows(opt=u)), [1.0], 1e-4, 1e9, for_des=False)
    split = len(LAYERS) * (m * 1e-4 + 2e-6 * base.batch_size)
    step = split / k + len(LAYERS) * u  # every replica updates every layer once per step
    assert evaluate_plan(p, plan).throughput == pytest.approx(base.batch_size / step)


@pytest.mark.parametrize(("overhead", "m", "expected"), [
    # per step: serial, every replica pays all of it, however slow the emulated type
    ({"step_overhead_s": 4e-4}, 2, 4e-4),
    # per microbatch: each of k = 2 replicas runs m / k = 2 of the 4 microbatches
    ({"microbatch_overhead_s": 1e-4}, 4, 2e-4)])
def test_runtime_overhead_is_not_dilated_and_splits_only_per_microbatch(overhead, m, expected):
    base = load_input(SCENARIO).problem
    plan = Plan(stages=(Stage(layers=tuple(LAYERS), resource=CPU_TYPE, num_replicas=2),),
                num_microbatches=m)
    fit = LayerFit.from_rows(_rows())
    with_o, without = (evaluate_plan(calibrated_problem(
        base, model_graph("tiny-ctr"), plan, fit, [3.0], 1e-4, 1e9, for_des=False,
        **extra), plan) for extra in (overhead, {}))
    assert with_o.step_time_s - without.step_time_s == pytest.approx(expected)


def test_run_speed_compares_compute_of_every_replica():
    from types import SimpleNamespace as NS

    from heterps_exec.calibration.validate import run_speed, slowed
    plan = Plan(stages=(Stage(layers=tuple(LAYERS[:5]), resource=CPU_TYPE, num_replicas=2),
                        Stage(layers=tuple(LAYERS[5:]), resource=CPU_TYPE, num_replicas=1)))
    measured = NS(extra={"stages": [{"compute_s": 0.003}, {"compute_s": 0.004}]})
    des = NS(extra={"stage_compute_s": [0.001, 0.002]})
    # (2 x 3 + 4) ms measured against (2 x 1 + 2) ms simulated
    assert run_speed(measured, des, plan) == pytest.approx(2.5)
    # the simulated compute holds the runtime's overhead, the measured one does not: with
    # 0.1 ms per step on each of 3 replicas and 0.05 per microbatch (m = 1) in each of 2
    # stages: (10 ms) / (4 - 0.3 - 0.1) ms
    assert plan.num_microbatches == 1
    assert run_speed(measured, des, plan, (1e-4, 5e-5)) == pytest.approx(10 / 3.6)
    base = load_input(SCENARIO).problem
    runnable = ~np.isnan(base.oct_s)
    assert np.array_equal(slowed(base, 2.5).oct_s[runnable], base.oct_s[runnable] * 2.5)


def test_simulated_compute_leaves_out_slow_messages_and_all_reduces():
    from heterps_sim.des import DesOptions, simulate
    base = load_input(SCENARIO).problem
    plan = Plan(stages=(Stage(layers=tuple(LAYERS[:5]), resource=CPU_TYPE, num_replicas=2),
                        Stage(layers=tuple(LAYERS[5:]), resource=CPU_TYPE, num_replicas=1)),
                num_microbatches=4, schedule="1f1b")
    fit = LayerFit.from_rows(_rows(opt=2e-5))
    p = calibrated_problem(base, model_graph("tiny-ctr"), plan, fit, [1.0, 2.0], 5e-3, 1e8,
                           for_des=True)  # 5 ms per message: communication dominates
    des = simulate(p, plan, seed=0, options=DesOptions(
        effects={"bubbles", "transfers", "allreduce"}, num_steps=8, warmup_steps=2)).result
    for stage, got in zip(des.stages, des.extra["stage_compute_s"], strict=True):
        k = stage.num_replicas  # Amdahl: the split part over k, the updates on every replica
        assert got == pytest.approx(stage.oct_s * (stage.alpha / k + 1 - stage.alpha))


def test_simulator_runs_the_plans_own_microbatch_count():
    from heterps_exec.calibration.validate import simulator_options
    from heterps_sim.des import simulate
    base = load_input(SCENARIO).problem
    fit = LayerFit.from_rows(_rows())
    for m in (1, 4):  # 1 is what the engine runs, not the simulator's "unset"
        plan = Plan(stages=(Stage(layers=tuple(LAYERS[:5]), resource=CPU_TYPE),
                            Stage(layers=tuple(LAYERS[5:]), resource=CPU_TYPE)),
                    num_microbatches=m, schedule="1f1b")
        p = calibrated_problem(base, model_graph("tiny-ctr"), plan, fit, [1.0, 1.0], 1e-3,
                               1e9, for_des=True)
        des = simulate(p, plan, seed=0, options=simulator_options(
            plan, [1.0, 1.0], steps=6, warmup=2, allreduce=None)).result
        assert des.extra["num_microbatches"] == m
        if m == 1:  # one microbatch: forward, message, both stages, message, backward
            serial = sum(s.oct_s for s in des.stages) + 2 * 1e-3
            assert des.step_time_s == pytest.approx(serial, rel=0.05)
            # exactly: the two messages carry the boundary's bytes (isend: the sender's work
            # holds no second copy of the transfer, DesOptions.sends_leave_work)
            wire = p.boundary_bytes[4] / 1e9  # after LAYERS[4], the cut
            assert des.step_time_s == pytest.approx(serial + wire, rel=1e-9)


def test_cuts_add_encode_and_decode_per_microbatch():
    base = load_input(SCENARIO).problem
    graph = model_graph("tiny-ctr")
    m = 3
    plan = Plan(stages=(Stage(layers=tuple(LAYERS[:5]), resource=CPU_TYPE, num_replicas=1),
                        Stage(layers=tuple(LAYERS[5:]), resource=CPU_TYPE, num_replicas=1)),
                num_microbatches=m)
    fit = LayerFit.from_rows(_rows())
    p = calibrated_problem(base, graph, plan, fit, [1.0, 1.0], 1e-4, 1e9, for_des=True)
    q = calibrated_problem(base, graph, Plan(stages=(Stage(layers=tuple(LAYERS),
                                                           resource=CPU_TYPE),),
                                             num_microbatches=m),
                           fit, [1.0], 1e-4, 1e9, for_des=True)
    j = base.type_index(CPU_TYPE)
    assert p.oct_s[4, j] - q.oct_s[4, j] == pytest.approx(m * 3e-5)
    assert p.oct_s[5, j] - q.oct_s[5, j] == pytest.approx(m * 2e-5)
    assert p.latency_s == 1e-4
    assert calibrated_problem(base, graph, plan, fit, [1.0, 1.0], 1e-4, 1e9,
                              for_des=False).latency_s == pytest.approx(2 * m * 1e-4)


def test_validation_plans_are_diverse_and_valid():
    base = load_input(SCENARIO).problem
    plans = diverse_plans(list(base.layer_names), list(base.type_names), 20, seed=1)
    assert len(plans) == len(set(plans)) == 20
    assert {len(p.stages) for p in plans} == {1, 2, 3, 4}
    assert {p.schedule for p in plans} == {"gpipe", "1f1b"}
    for p in plans:
        assert p.layer_names == base.layer_names
        assert sum(s.num_replicas for s in p.stages) <= 6
        assert p.num_microbatches >= max(s.num_replicas for s in p.stages)
    assert diverse_plans(list(base.layer_names), list(base.type_names), 20, seed=1) == plans
    two = diverse_plans(list(base.layer_names), list(base.type_names), 20, seed=1, max_ranks=2)
    assert len(set(two)) == 20 and {len(p.stages) for p in two} == {1, 2}
    assert all(sum(s.num_replicas for s in p.stages) <= 2 for p in two)


def test_error_metrics():
    assert mape([110, 90], [100, 100]) == pytest.approx(10.0)
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)


def test_component_errors_add_up_to_the_step_error():
    from heterps_exec.calibration.validate import component_errors
    rows = [{"measured_step_s": 0.010,
             "measured_split": {"compute_s": 0.004, "transfer_s": 0.004, "idle_s": 0.002},
             "des_split": {"compute_s": 0.005, "transfer_s": 0.001, "idle_s": 0.002}},
            {"measured_step_s": 0.020,
             "measured_split": {"compute_s": 0.010, "transfer_s": 0.006, "idle_s": 0.004},
             "des_split": {"compute_s": 0.010, "transfer_s": 0.002, "idle_s": 0.000}}]
    errors = component_errors(rows)
    assert errors["compute_s"]["mean_signed_pct"] == pytest.approx(5.0)    # (+10% + 0) / 2
    assert errors["transfer_s"]["mean_signed_pct"] == pytest.approx(-25.0)  # (-30% - 20%) / 2
    assert errors["idle_s"]["mean_abs_pct"] == pytest.approx(10.0)         # (0 + 20%) / 2


@pytest.mark.timeout(300)
def test_validate_command_writes_report_csv_and_figure(tmp_path):
    import json as _json

    from PIL import Image

    from tests.exec.helpers import run_exec
    profile = tmp_path / "profile.csv"
    header = "model,layer,resource,batch_size,oct_s,odt_s,forward_s,backward_s,encode_s,decode_s\n"
    profile.write_text(header + "".join(
        f"tiny-ctr,{r['layer']},local-cpu,{r['batch_size']},{r['forward_s'] + r['backward_s']},,"
        f"{r['forward_s']},{r['backward_s']},{r['encode_s']},{r['decode_s']}\n" for r in _rows()))
    links = tmp_path / "links.json"
    links.write_text(_json.dumps({"latency_s": 2e-4, "bytes_per_s": 1e9}))
    out = tmp_path / "val"
    code, stdout, err = run_exec("validate", "--plans", "2", "--scenario", SCENARIO,
                                 "--profile", str(profile), "--links", str(links),
                                 "--steps", "3", "--max-ranks", "2", "--out", str(out),
                                 "--repeats", "2", "--message-cpu", "calibrate", "--json")
    assert code == 0, err
    report = _json.loads(stdout)
    assert report["num_plans"] == 2 and len(report["plans"]) == 2 and report["repeats"] == 2
    for row in report["plans"]:  # two runs each; the lower middle of two is the slower
        assert len(row["measured_runs"]) == 2 and row["measured"] == min(row["measured_runs"])
    assert len(list(out.glob("run0*-1"))) == 2  # the second round ran every plan again
    assert len(list(out.glob("runcalibration-m[18]-[01]"))) == 4  # 1 and 8 microbatches, x2
    assert report["step_overhead_s"] >= 0 and report["microbatch_overhead_s"] >= 0
    # --message-cpu calibrate: a message's CPU as the engine pays it, one two-rank pipeline
    # calibration per schedule and cut that a multi-stage plan makes, each run twice
    # (--repeats 2), the links' (none here) kept for the rest
    from heterps_exec.calibration.message_cost import plan_cuts
    from heterps_sim.inputs.load import load_plan
    plans = [load_plan(out / "plans" / f"{n:03d}-0.json") for n in range(2)]
    want = plan_cuts(plans, LAYERS)
    piped = {r["schedule"] for r in report["plans"] if r["stages"] > 1}
    assert piped and set(report["message_cpu"]) == piped == set(want)
    for schedule, cuts in want.items():
        assert list(report["message_cpu"][schedule]["per_cut_s"]) == [LAYERS[c - 1]
                                                                     for c in cuts]
    cuts = sum(len(c) for c in want.values())
    assert len(list(out.glob("runcalibration-*-cut*-[01]"))) == 2 * cuts
    for cpu in report["message_cpu"].values():
        assert cpu["send_s"] == cpu["recv_s"] == 0.0
        # (upstream, downstream) rank's figure per cut
        assert all(len(pair) == 2 and min(pair) >= 0 for pair in cpu["per_cut_s"].values())
    assert report["host_load_before"] >= 0 and report["host_cores"] >= 1
    for key in ("mape_des", "mape_analytic", "kendall_tau_des", "kendall_tau_analytic"):
        assert math.isfinite(report[key])
    for row in report["plans"]:
        assert row["measured"] > 0 and row["des"] > 0 and row["analytic"] > 0
        assert row["des_step_s"] == pytest.approx(256 / row["des"])  # exec-tiny's batch
    assert set(report["component_errors_des"]) == {"compute_s", "transfer_s", "idle_s"}
    assert (out / "validate.csv").read_text().startswith("plan,")
    import numpy as np
    image = np.asarray(Image.open(out / "scatter.png").convert("L"))
    assert image.shape[1] >= 400 and len(np.unique(image)) > 10  # drawn, not blank


def test_runtime_overhead_is_the_line_through_both_calibration_runs():
    from heterps_exec.calibration.validate import runtime_overhead
    assert runtime_overhead({1: 3e-4, 8: 1.0e-3}) == pytest.approx((2e-4, 1e-4))
    assert runtime_overhead({8: 1.0e-3, 1: 3e-4}) == pytest.approx((2e-4, 1e-4))
    assert runtime_overhead({1: 5e-4, 8: 4e-4}) == (5e-4, 0.0)  # noise: no negative slope
    assert runtime_overhead({1: 1e-4, 8: 1.5e-3}) == (0.0, pytest.approx(2e-4))


def test_median_run_is_the_middle_run_whole():
    from types import SimpleNamespace

    from heterps_exec.calibration.validate import median_run
    runs = [SimpleNamespace(throughput=t, tag=i) for i, t in enumerate((30.0, 10.0, 20.0))]
    assert median_run(runs).tag == 2
    assert median_run(runs[:2]).tag == 1  # even count: the lower middle (pessimistic)
    assert median_run(runs[:1]).tag == 0


def test_validate_refuses_bad_input(tmp_path):
    from tests.exec.helpers import run_exec
    code, _, err = run_exec("validate", "--plans", "1")
    assert code == 2 and "--plans" in err
    code, _, err = run_exec("validate", "--repeats", "0")
    assert code == 2 and "--repeats" in err
    code, _, err = run_exec("validate", "--core-sharing", "lottery")
    assert code == 2 and "--core-sharing" in err and "lottery" in err
    code, _, err = run_exec("validate", "--message-cpu", "guess")
    assert code == 2 and "--message-cpu" in err and "guess" in err
    links = tmp_path / "negative-cpu.json"  # a measured all-reduce CPU below zero
    links.write_text('{"latency_s": 2e-4, "bytes_per_s": 1e9, "allreduce": '
                     '[{"ranks": 2, "bytes": 4, "seconds": 1e-3, "cpu_s": -1e-4}]}')
    code, _, err = run_exec("validate", "--profile", str(tmp_path / "none.csv"),
                            "--links", str(links))
    assert code == 2 and "cpu_s" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_exec("validate", "--profile", str(tmp_path / "none.csv"),
                            "--links", str(tmp_path / "none.json"))
    assert code == 2 and "none.json: no such file" in err  # the links are read first
    links = tmp_path / "links.json"
    links.write_text('{"latency_s": 2e-4, "bytes_per_s": 1e9}')
    code, _, err = run_exec("validate", "--profile", str(tmp_path / "none.csv"),
                            "--links", str(links), "--out", str(tmp_path / "v"))
    assert code == 2 and "none.csv: no such file" in err
