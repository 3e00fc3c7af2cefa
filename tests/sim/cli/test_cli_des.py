"""The simulator from the command line: evaluate --engine des, traces, the effects table."""

import json

import pytest

from heterps_sim.cli import main
from heterps_sim.des import EFFECTS


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def tiny_plan(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    code, _, _ = run(["schedule", "scenarios/exec-tiny.yaml", "--out", str(plan), "--json"], capsys)
    assert code == 0
    return plan


def test_des_with_effects_off_agrees_with_the_paper_model(tiny_plan, capsys):
    """Under the paper model the simulator with every effect off IS the analytic model."""
    model = ["--model", "paper"]
    _, out, _ = run(["evaluate", "scenarios/exec-tiny.yaml", str(tiny_plan), "--json", *model],
                    capsys)
    analytic = json.loads(out)
    code, out, _ = run(["evaluate", "scenarios/exec-tiny.yaml", str(tiny_plan), "--engine", "des",
                        "--schedule", "async", "--effects", "none", "--json", *model], capsys)
    des = json.loads(out)
    assert code == 0 and des["source"] == "des"
    assert des["throughput"] == pytest.approx(analytic["throughput"], rel=0.01)


def test_des_with_effects_off_runs_the_default_models_stage_work(tiny_plan, capsys):
    """Under the default model it runs min_g B / (ET_g(k_g) - AR_g(k_g)): the stage work
    without the all-reduce and the PS cap, which its effects add (docs/design.md)."""
    from heterps_sim.cost import dominant
    from heterps_sim.cost.reference import evaluate_plan, plan_stages
    from heterps_sim.inputs.load import load_input, load_plan
    problem = load_input("scenarios/exec-tiny.yaml", "default").problem
    plan = load_plan(tiny_plan)
    plan = plan.with_replicas([s.num_replicas for s in evaluate_plan(problem, plan).stages])
    worst = max(t.exec_time(s.num_replicas) - dominant.allreduce_time(t.bw_s, t.lat_s,
                                                                       s.num_replicas)
                for t, s in zip(plan_stages(problem, plan), plan.stages, strict=True))
    code, out, _ = run(["evaluate", "scenarios/exec-tiny.yaml", str(tiny_plan), "--engine", "des",
                        "--schedule", "async", "--effects", "none", "--json",
                        "--model", "default"], capsys)
    assert code == 0
    assert json.loads(out)["throughput"] == pytest.approx(problem.batch_size / worst, rel=0.01)


def test_des_trace_opens_as_trace_events(tiny_plan, tmp_path, capsys):
    trace = tmp_path / "trace.json"
    code, _, _ = run(["evaluate", "scenarios/exec-tiny.yaml", str(tiny_plan), "--engine", "des",
                      "--schedule", "1f1b", "--microbatches", "4", "--effects", "all",
                      "--trace", str(trace), "--json"], capsys)
    doc = json.loads(trace.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert code in (0, 1) and spans
    assert {e["name"][0] for e in spans if e["cat"] == "compute"} >= {"F", "B"}
    assert all(e["dur"] >= 0 for e in spans)


def test_effects_table_has_every_effect(capsys):
    """Under the paper model "des: all off" is the analytic model (docs/design.md)."""
    code, out, _ = run(["effects", "scenarios/exec-tiny.yaml", "--steps", "2", "--json",
                        "--model", "paper"], capsys)
    rows = json.loads(out)
    labels = [r["configuration"] for r in rows]
    assert code == 0
    assert labels == ["analytic", "des: all off"] + [f"des: {e} only" for e in EFFECTS] + ["des: all on"]
    assert abs(rows[1]["vs analytic %"]) < 5.0


def test_unknown_effect_is_bad_input(tiny_plan, capsys):
    code, _, err = run(["evaluate", "scenarios/exec-tiny.yaml", str(tiny_plan), "--engine", "des",
                        "--effects", "gremlins"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "gremlins" in err


def test_hps_flags_reach_the_simulator(capsys):
    """A mixed stage (2 x T4 + 1 x EPYC) with a unit made 2x slower: the speed split beats the
    equal one in both cases, and the slow unit costs time either way."""
    plan = "scenarios/plans/exec-tiny-mixed.json"
    base = ["evaluate", "scenarios/exec-tiny.yaml", plan, "--engine", "des", "--effects",
            "bubbles", "--microbatches", "12", "--json"]
    step = {}
    for name, flags in (("equal", []), ("speed", ["--share", "speed"]),
                        ("slow", ["--slow-replica", "0:0:2"]),
                        ("slow speed", ["--slow-replica", "0:0:2", "--share", "speed"])):
        code, out, _ = run(base + flags, capsys)
        assert code in (0, 1)
        step[name] = json.loads(out)["step_time_s"]
    assert step["speed"] < step["equal"] and step["slow speed"] < step["slow"]
    assert step["slow"] > step["equal"] and step["slow speed"] > step["speed"]
    code, _, err = run(base + ["--slow-replica", "5:0:2"], capsys)
    assert code == 2 and "--slow-replica 5:0:2" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(base + ["--slow-replica", "0:x"], capsys)
    assert code == 2 and "STAGE:REPLICA:FACTOR" in err


@pytest.mark.parametrize(("slow", "why"), [
    ("0:0:nan", "the factor must be a finite number >= 1"),  # refused as it is read
    ("0:0:inf", "the factor must be a finite number >= 1"),
    ("-1:0:2", "the plan has no such replica"), ("0:-1:2", "the plan has no such replica"),
    ("0:0:0.5", "the plan has no such replica")])
def test_slow_replicas_outside_the_plan_or_not_slower_are_bad_input(slow, why, capsys):
    """The check the engine uses too (HpsOptions.missing_replica): a negative index (which
    Python would read from the end) is not a replica of the plan; a factor that is not a
    finite number is refused as the flag is read."""
    code, _, err = run(["evaluate", "scenarios/exec-tiny.yaml", "scenarios/plans/exec-tiny-mixed.json",
                        "--engine", "des", f"--slow-replica={slow}"], capsys)
    assert code == 2 and f"--slow-replica {slow}: {why}" in err
    assert len(err.strip().splitlines()) == 1
