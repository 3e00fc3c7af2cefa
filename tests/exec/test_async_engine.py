"""The async schedule through torchrun: every layout trains exactly like the async oracle.

The oracle (runtime/reference.py) trains the whole model in one process by the staleness rule
(step t's gradient at W(max(0, t - D))); it knows no stages, replicas or microbatch order. A
run must equal it to 1e-5, must NOT equal synchronous training where D > 0 (else the test could
not tell async from sync), and a run killed and resumed from its checkpoint must end with the
same bytes as an unbroken one.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from heterps_exec.runtime.layout import RunSpec
from heterps_exec.runtime.reference import train_reference
from heterps_sim.core.asynchrony import staleness
from tests.exec.helpers import SCENARIO, assert_matches_reference, run_exec, tiny_plan
from tests.exec.model.test_user_model_runs import FIXTURES, write_plan

# (cuts, replicas per stage, microbatches, optimizer, PS shards): D = 1, 1 (replicated),
# 2, 3, 0; with the tables on the parameter server: a replicated table stage (D = 1), the
# tables split over two stages and two shards (D = 1), four stages (D = 3)
PLANS = [
    ([10], [1, 1], 4, "sgd", 0),
    ([10], [2, 2], 3, "adagrad", 0),
    ([9, 11], [3, 2, 1], 6, "sgd", 0),
    ([5, 10, 12], [1, 1, 2, 1], 3, "sgd", 0),
    ([], [2], 4, "sgd", 0),
    ([4], [2, 1], 4, "adagrad", 1),
    ([4, 11], [1, 1, 1], 2, "sgd", 2),
    ([5, 10, 12], [1, 1, 2, 1], 3, "sgd", 1),
]


def _run(tmp_path: Path, plan: Path, *extra: str, scenario: str = SCENARIO,
         name: str = "run") -> dict:
    code, out, err = run_exec("run", str(plan), "--scenario", scenario, "--out",
                              str(tmp_path / name), "--rank-timeout", "60", "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def _sync_difference(run_dir: Path, state: Path) -> float:
    """Largest weight difference between the run and SYNCHRONOUS training of its plan."""
    spec = RunSpec.load(run_dir / "spec.json")
    _, want = train_reference(replace(spec, plan={**spec.plan, "schedule": "1f1b"}))
    got = torch.load(state)
    return max(float((got[k] - want[k]).abs().max()) for k in want)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("cuts,replicas,m,optimizer,shards", PLANS,
                         ids=[f"{r}-m{m}-ps{n}" for _, r, m, _, n in PLANS])
def test_async_plan_trains_exactly_like_the_async_oracle(tmp_path, cuts, replicas, m,
                                                         optimizer, shards):
    plan = tiny_plan(tmp_path / "plan.json", cuts, replicas, schedule="async", m=m)
    lr = "0.02" if optimizer == "adagrad" else "0.5"
    result = _run(tmp_path, plan, "--steps", "5", "--optimizer", optimizer, "--lr", lr,
                  "--save-state", str(tmp_path / "state.pt"), "--ps-shards", str(shards))
    if shards:  # the tables really were on the PS: rank 0's rows pulled and pushed there
        assert len(result["extra"]["ps"]["servers"]) == shards
        client = result["extra"]["ps"]["client"]
        assert client and all(c["pull_rows"] > 0 and c["push_rows"] > 0
                              for c in client.values())
    assert [s["num_replicas"] for s in result["stages"]] == replicas
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
    d = staleness(replicas, m)
    if d > 0:  # stale gradients give other weights than synchronous training
        assert _sync_difference(tmp_path / "run", tmp_path / "state.pt") > 1e-4
    else:  # one stage: the rule is synchronous training
        assert _sync_difference(tmp_path / "run", tmp_path / "state.pt") <= 1e-5


@pytest.mark.timeout(400)
def test_killed_async_run_resumes_to_the_same_bytes(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [9, 11], [2, 1, 1], schedule="async", m=3)
    assert staleness([2, 1, 1], 3) == 2  # the checkpoint holds two older versions
    whole = _run(tmp_path, plan, "--steps", "6", "--save-state", str(tmp_path / "whole.pt"),
                 name="whole")
    broken = _run(tmp_path, plan, "--steps", "6", "--checkpoint-dir", str(tmp_path / "ckpt"),
                  "--checkpoint-every", "2", "--max-restarts", "1", "--inject-fault", "1:3",
                  "--save-state", str(tmp_path / "broken.pt"), name="broken")
    assert broken["extra"]["first_step"] == 2  # the second attempt resumed at step 2
    assert "exitcode: -9" in (tmp_path / "broken" / "torchrun.log").read_text()
    a, b = torch.load(tmp_path / "whole.pt"), torch.load(tmp_path / "broken.pt")
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)
    assert broken["extra"]["losses"] == whole["extra"]["losses"][2:]
    assert_matches_reference(tmp_path / "broken", tmp_path / "broken.pt", broken)


@pytest.mark.timeout(300)
def test_a_sync_checkpoint_does_not_resume_an_async_plan(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    sync = tiny_plan(tmp_path / "a.json", [10], [1, 1], schedule="1f1b", m=4)
    _run(tmp_path, sync, "--steps", "2", "--checkpoint-dir", ckpt, "--checkpoint-every", "2",
         name="a")
    stale = tiny_plan(tmp_path / "b.json", [10], [1, 1], schedule="async", m=4)
    code, _, err = run_exec("run", str(stale), "--scenario", SCENARIO, "--steps", "4",
                            "--checkpoint-dir", ckpt, "--out", str(tmp_path / "b"),
                            "--rank-timeout", "60")
    assert code == 2
    assert "saved by a synchronous run" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_user_module_trains_async_like_its_oracle(tmp_path):
    scenario = FIXTURES / "deepfm.yaml"
    plan = write_plan(tmp_path / "plan.json", scenario, [2, 6], [1, 2, 1], "async", m=4)
    result = _run(tmp_path, plan, "--steps", "4", "--lr", "0.1", "--save-state",
                  str(tmp_path / "state.pt"), scenario=str(scenario))
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
    assert _sync_difference(tmp_path / "run", tmp_path / "state.pt") > 1e-5


@pytest.mark.parametrize("flag", [["--share", "speed"], ["--overlap", "on"]])
def test_async_refuses_what_reduces_per_flushed_step(tmp_path, flag):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1], schedule="async", m=4)
    code, _, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "2",
                            "--out", str(tmp_path / "run"), *flag)
    assert code == 2 and err.count("\n") == 1
    assert f"schedule async runs without {flag[0]}" in err


def test_async_with_a_parameter_server_does_not_checkpoint(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1], schedule="async", m=4)
    code, _, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "2",
                            "--out", str(tmp_path / "run"), "--ps-shards", "1",
                            "--checkpoint-dir", str(tmp_path / "ckpt"))
    assert code == 2 and err.count("\n") == 1
    assert "runs without --checkpoint-dir" in err


@pytest.mark.timeout(300)
def test_a_yaml_model_trains_async_like_its_oracle(tmp_path):
    root = Path(__file__).resolve().parents[2]
    plan = json.loads((root / "scenarios" / "plans" / "yaml-model-onprem.json").read_text())
    plan["schedule"] = "async"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    result = _run(tmp_path, tmp_path / "plan.json", "--steps", "4", "--save-state",
                  str(tmp_path / "state.pt"),
                  scenario=str(root / "scenarios" / "yaml-model-onprem.yaml"))
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
    assert _sync_difference(tmp_path / "run", tmp_path / "state.pt") > 1e-5
