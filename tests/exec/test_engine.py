"""The engine end to end through torchrun: every layout trains exactly like one process.

Each run starts 1-6 ranks on this machine (gloo over loopback); bounded by pytest-timeout
and the engine's own rank timeout, so a hung rank fails the test instead of CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from heterps_sim.core.trace import CATEGORIES
from tests.exec.helpers import SCENARIO, assert_matches_reference, run_exec, tiny_plan

ROOT = Path(__file__).resolve().parents[2]

# (cut after these layer counts, replicas per stage, schedule, microbatches, optimizer).
# Adagrad divides by the root of the summed squared gradients, so it amplifies the rounding
# of gradients that nearly cancel (summed per microbatch here, per batch in the reference):
# at lr 0.5 a few embedding rows differ by 1e-4 after 4 steps, SGD by 1e-8. Adagrad runs at
# lr 0.02 to stay inside the 1e-5 oracle; that is float arithmetic, not a different update.
PLANS = [
    ([], [1], "gpipe", 1, "sgd"),
    ([10], [2, 1], "1f1b", 4, "sgd"),
    ([1, 11], [1, 2, 1], "gpipe", 4, "adagrad"),
    ([9], [2, 2], "1f1b", 4, "sgd"),
    ([9, 11], [3, 2, 1], "1f1b", 6, "sgd"),
    ([5, 10, 12], [1, 1, 2, 1], "gpipe", 3, "sgd"),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("cuts,replicas,schedule,m,optimizer", PLANS,
                         ids=[f"{r}-{s}" for _, r, s, _, _ in PLANS])
def test_plan_trains_exactly_like_single_process(tmp_path, cuts, replicas, schedule, m,
                                                 optimizer):
    plan = tiny_plan(tmp_path / "plan.json", cuts, replicas, schedule=schedule, m=m)
    lr = "0.02" if optimizer == "adagrad" else "0.5"
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "4",
                              "--optimizer", optimizer, "--lr", lr,
                              "--out", str(tmp_path / "run"), "--save-state",
                              str(tmp_path / "state.pt"), "--rank-timeout", "60", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["source"] == "exec" and result["throughput"] > 0
    assert [s["num_replicas"] for s in result["stages"]] == replicas
    assert result["extra"]["world_size"] == sum(replicas)
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
    assert result["extra"]["losses"][-1] < result["extra"]["losses"][0]  # it learns


@pytest.mark.timeout(300)
def test_killed_rank_restarts_from_checkpoint_to_the_same_weights(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [10], [2, 1])
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "6",
                              "--out", str(tmp_path / "run"), "--checkpoint-dir",
                              str(tmp_path / "ckpt"), "--checkpoint-every", "2",
                              "--max-restarts", "1", "--inject-fault", "1:3",
                              "--save-state", str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["extra"]["first_step"] == 2  # the second attempt resumed at step 2
    assert "exitcode: -9" in (tmp_path / "run" / "torchrun.log").read_text()
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == "step_00000006"
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)


@pytest.mark.timeout(300)
def test_checkpoint_resumes_under_a_different_plan(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    first = tiny_plan(tmp_path / "a.json", [10], [2, 1], schedule="gpipe")
    code, _, err = run_exec("run", str(first), "--scenario", SCENARIO, "--steps", "3",
                            "--out", str(tmp_path / "a"), "--checkpoint-dir", ckpt,
                            "--checkpoint-every", "3", "--optimizer", "adagrad", "--lr", "0.02")
    assert code == 0, err
    second = tiny_plan(tmp_path / "b.json", [1, 12], [1, 2, 1], schedule="1f1b", m=2)
    code, out, err = run_exec("run", str(second), "--scenario", SCENARIO, "--steps", "6",
                              "--out", str(tmp_path / "b"), "--checkpoint-dir", ckpt,
                              "--optimizer", "adagrad", "--lr", "0.02", "--save-state",
                              str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["extra"]["first_step"] == 3
    assert_matches_reference(tmp_path / "b", tmp_path / "state.pt", result)


@pytest.mark.timeout(300)
def test_two_node_launch_over_loopback(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    plan = tiny_plan(tmp_path / "plan.json", [9], [2, 2])
    common = ["run", str(plan), "--scenario", SCENARIO, "--steps", "3", "--nnodes", "2",
              "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "two-node-test"]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "heterps_exec.cli", *common, "--node-rank", str(n), "--out",
         str(tmp_path / f"node{n}"), "--save-state", str(tmp_path / f"state{n}.pt"), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in (0, 1)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    reporting = [n for n in (0, 1) if (tmp_path / f"node{n}" / "result.json").exists()]
    assert len(reporting) == 1  # the node that ran rank 0 reports for everyone
    n = reporting[0]
    result = json.loads(outs[n][0])
    assert result["extra"]["world_size"] == 4
    assert_matches_reference(tmp_path / f"node{n}", tmp_path / f"state{n}.pt", result)


@pytest.mark.timeout(240)
def test_shipped_plan_on_emulated_types_traces_every_microbatch(tmp_path):
    trace = tmp_path / "trace.json"
    code, out, err = run_exec("run", str(ROOT / "scenarios/plans/exec-tiny-pipeline.json"),
                              "--scenario", SCENARIO, "--binding",
                              str(ROOT / "scenarios/bindings/emulated.yaml"), "--steps", "3",
                              "--out", str(tmp_path / "run"), "--trace", str(trace), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["extra"]["emulated"] == ["epyc-milan-32vcpu", "t4", "xeon-icelake-16vcpu"]
    assert result["extra"]["slowdowns"][1] == 1.0 and min(result["extra"]["slowdowns"]) == 1.0
    doc = json.loads(trace.read_text())
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"stage 0 / replica 0 (xeon-icelake-16vcpu)",
                     "stage 0 / replica 1 (xeon-icelake-16vcpu)",
                     "stage 1 / replica 0 (t4)", "stage 2 / replica 0 (epyc-milan-32vcpu)"}
    forwards = [e["name"] for e in events if e["name"].startswith("F")]
    assert sorted(forwards) == sorted(f"F{mu}" for mu in range(12) for _ in range(3))
    # each forward message is packed by its sender and unpacked by its receiver as compute
    # (the cost model folds the profiled encode and decode into the layers at the cut):
    # each of the traced step's 12 microbatches at each of the 2 cuts
    for verb in ("encode", "decode"):
        spans = [e for e in events if e["name"].startswith(f"{verb} F")]
        assert sorted(e["name"] for e in spans) == sorted(
            f"{verb} F{mu}" for mu in range(12) for _ in range(2))
        assert {e["cat"] for e in spans} == {"compute"}
    assert {e["cat"] for e in events} <= set(CATEGORIES)
    assert all(e["dur"] >= 0 for e in events)
    # each stage's compute CPU (its thread's, inside the spans) is at most the spans' wall
    # over the type's dilation (the dilation sleeps), give or take the timing of each span
    # (its clock reads, not dilated: 20 us each is generous), and at most the replica's
    # process CPU
    track_stage = {(e["pid"], e["tid"]): int(e["args"]["name"].split()[1])
                   for e in doc["traceEvents"] if e["name"] == "thread_name"}
    spans_per_stage = Counter(track_stage[e["pid"], e["tid"]] for e in events
                              if e["cat"] == "compute")
    for g, (stage, x) in enumerate(zip(result["extra"]["stages"], result["extra"]["slowdowns"],
                                       strict=True)):
        per_replica = spans_per_stage[g] / result["stages"][g]["num_replicas"]
        assert 0 < stage["compute_cpu_s"] <= stage["compute_s"] / x * 1.05 + per_replica * 2e-5
        assert stage["compute_cpu_s"] <= stage["cpu_s"] + 1e-4


@pytest.mark.timeout(240)
def test_a_hung_rank_fails_the_run_within_the_timeout(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1])
    code, _, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "4",
                            "--out", str(tmp_path / "run"), "--inject-fault", "1:2:hang",
                            "--rank-timeout", "5", "--timeout", "120")
    assert code == 1
    assert "failed" in err and "torchrun.log" in err


ZOO = [("dlrm", "0.0001"), ("ctr-dnn", "0.001"), ("2emb", "0.0001"), ("wide-deep", "0.0001"),
       ("matchnet", "0.001"), ("nce", "0.001")]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("model,scale,schedule", [
    pytest.param(m, s, sch, marks=() if m == "dlrm" else pytest.mark.slow)
    for m, s in ZOO for sch in ("1f1b", "async")])
def test_every_zoo_model_pipelines_exactly(tmp_path, model, scale, schedule):
    """Each zoo model (tables scaled down) cut in the middle, replicas (2, 1), under 1f1b
    and under async (against the async oracle, runtime/reference.py)."""
    from heterps_sim.inputs.zoo import get_model
    layers = [la.name for la in get_model(model).layers]
    cut = len(layers) // 2
    (tmp_path / "s.yaml").write_text(
        f"name: zoo-{model}\nmodel: {{name: {model}}}\ncluster: {{types: [xeon-icelake-16vcpu]}}"
        "\nworkload: {batch_size: 64, throughput_limit: 1000, num_samples: 1.0e+6}\n")
    (tmp_path / "p.json").write_text(json.dumps({"stages": [
        {"layers": layers[:cut], "resource": "xeon-icelake-16vcpu", "num_replicas": 2},
        {"layers": layers[cut:], "resource": "xeon-icelake-16vcpu", "num_replicas": 1}],
        "num_microbatches": 2, "schedule": schedule}))
    code, out, err = run_exec("run", str(tmp_path / "p.json"), "--scenario",
                              str(tmp_path / "s.yaml"), "--steps", "3", "--table-scale", scale,
                              "--out", str(tmp_path / "run"), "--save-state",
                              str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", json.loads(out))
