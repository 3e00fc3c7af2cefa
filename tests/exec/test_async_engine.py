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

import numpy as np
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
    # the stream forgets a send once it knows it arrived (gloo's sends never report done
    # unwaited): the last stage's gradients to a replica that has since sent a forward of
    # step t + D + 1 (it applied update t, after its backwards of step t), so at most D + 1
    # steps of them wait; elsewhere also the forwards whose gradient is not back yet. Bounds
    # that do not grow with the run (5 steps here; before, every send waited to the end)
    ranks = json.loads((tmp_path / "run" / "ranks.json").read_text())["ranks"]
    for part in (p for p in ranks if p.get("role", "trainer") == "trainer"):
        bound = ((d + 1) * m if part["stage"] == len(replicas) - 1 else
                 (d + 2) * m + len(replicas) * max(replicas))
        assert part["most_sends_pending"] <= bound, (part["rank"], part["most_sends_pending"])
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


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_root_modules_own_parameter_is_read_at_its_version(tmp_path):
    """A parameter the user's root module holds itself (messy.py:OldTensorParam's
    field_weight, not in a submodule) is read at the step's version like any other: the
    engine's graph and the oracle's module both read the swapped one (they read the live one,
    and agreed with each other, 4e-3 away from the rule)."""
    from tests.exec.model.test_messy_models import scenario as messy

    path = messy(tmp_path, "old-tensor")
    plan = write_plan(tmp_path / "plan.json", path, [1], [1, 1], "async")
    result = _run(tmp_path, plan, "--steps", "5", "--lr", "0.5", "--save-state",
                  str(tmp_path / "state.pt"), scenario=str(path))
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
    assert _sync_difference(tmp_path / "run", tmp_path / "state.pt") > 1e-5


def test_the_oracle_reads_a_root_parameter_at_its_version():
    """runtime/reference.reading swaps a wrapped user module's own parameters where its
    forward reads them (torch.func.functional_call on the wrapper does not)."""
    from heterps_exec.runtime.reference import reading

    class Root(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 1)
            self.bias = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return self.fc(x) + self.bias

    class Wrapper(torch.nn.Module):  # as model/user_model.UserWhole registers the root's
        def __init__(self, inner):
            super().__init__()
            self.__dict__["inner"] = inner
            for name, child in inner.named_children():
                self.add_module(name, child)
            for name, p in inner.named_parameters(recurse=False):
                self.register_parameter(name, p)

        def forward(self, x):
            return self.inner(x)

    model = Wrapper(Root())
    x = torch.ones(1, 2)
    read = {n: p.detach() + 1.0 for n, p in model.named_parameters()}
    want = x @ read["fc.weight"].T + read["fc.bias"] + read["bias"]
    live = model(x)
    with reading(model, read):
        assert torch.allclose(model(x), want)
    assert torch.equal(model(x), live)  # the live parameters are back

    class Tied(Root):  # one parameter under two names: read by the second one too
        def __init__(self):
            super().__init__()
            self.fc2 = torch.nn.Linear(2, 1)
            self.fc2.weight = self.fc.weight

        def forward(self, x):
            return self.fc(x) + self.fc2(x)

    model = Wrapper(Tied())
    read = {n: p.detach() + 1.0 for n, p in model.named_parameters()}
    assert "fc2.weight" not in read
    want = 2 * x @ read["fc.weight"].T + read["fc.bias"] + read["fc2.bias"]
    with reading(model, read):
        assert torch.allclose(model(x), want)


@pytest.mark.parametrize("flag", [["--share", "speed"], ["--overlap", "on"]])
def test_async_refuses_what_reduces_per_flushed_step(tmp_path, flag):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1], schedule="async", m=4)
    code, _, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "2",
                            "--out", str(tmp_path / "run"), *flag)
    assert code == 2 and err.count("\n") == 1
    assert f"schedule async runs without {flag[0]}" in err


def test_an_async_ps_checkpoint_resumes_only_with_its_shards(tmp_path):
    """An async run checkpoints with its tables on the PS; the resume that would lose rows
    (another --ps-shards) is refused before any rank starts, in one line."""
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1], schedule="async", m=4)
    ckpt = str(tmp_path / "ckpt")
    _run(tmp_path, plan, "--steps", "2", "--ps-shards", "1", "--checkpoint-dir", ckpt,
         "--checkpoint-every", "2")
    for shards, text in (("2", "num_shards 1, expected num_shards 2"),
                         ("0", "resume with the same --ps-shards")):
        code, _, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "4",
                                "--out", str(tmp_path / f"again{shards}"), "--ps-shards",
                                shards, "--checkpoint-dir", ckpt)
        assert code == 2 and err.count("\n") == 1, err
        assert text in err


# (cuts, replicas, m, PS shards, checkpoint every of the unbroken run): the tables on one
# replicated stage, D = 2, against a run that never stops in the middle; the tables over two
# stages and two shards, D = 1, against a run that checkpoints at the same steps
PS_RESUMES = [([9, 11], [2, 1, 1], 3, 1, 4), ([4, 11], [1, 1, 1], 2, 2, 2)]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("cuts,replicas,m,shards,every", PS_RESUMES,
                         ids=[f"ps{n}-d{staleness(r, m)}" for _, r, m, n, _ in PS_RESUMES])
def test_killed_async_run_on_the_ps_resumes_to_the_same_bytes(tmp_path, cuts, replicas, m,
                                                              shards, every):
    """The PS's checkpoint holds the pushes of the last D steps pending: a run killed (on a
    replica with tables) after the checkpoint of step 2 and resumed ends with the same
    weights, table rows and Adagrad state as one that was not, and both equal the oracle."""
    plan = tiny_plan(tmp_path / "plan.json", cuts, replicas, schedule="async", m=m)
    common = ("--steps", "4", "--optimizer", "adagrad", "--lr", "0.02", "--ps-shards",
              str(shards))
    whole = _run(tmp_path, plan, *common, "--checkpoint-dir", str(tmp_path / "ckpt-whole"),
                 "--checkpoint-every", str(every), "--save-state", str(tmp_path / "whole.pt"),
                 name="whole")
    broken = _run(tmp_path, plan, *common, "--checkpoint-dir", str(tmp_path / "ckpt"),
                  "--checkpoint-every", "2", "--max-restarts", "1", "--inject-fault", "1:3",
                  "--save-state", str(tmp_path / "broken.pt"), name="broken")
    assert broken["extra"]["first_step"] == 2  # the second attempt resumed at step 2
    assert "exitcode: -9" in (tmp_path / "broken" / "torchrun.log").read_text()
    a, b = torch.load(tmp_path / "whole.pt"), torch.load(tmp_path / "broken.pt")
    assert any(k.startswith("emb_") for k in a)  # the tables' rows, pulled from the PS
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)
    assert broken["extra"]["losses"] == whole["extra"]["losses"][2:]
    for s in range(shards):  # the PS's checkpoints of step 4: every row with its Adagrad
        want = _ps_rows(tmp_path / "ckpt-whole", s, shards, tmp_path / "a")  # state, and
        got = _ps_rows(tmp_path / "ckpt", s, shards, tmp_path / "b")  # the pushes pending
        assert want.keys() == got.keys() and all(want[k] == got[k] for k in want)
    assert_matches_reference(tmp_path / "broken", tmp_path / "broken.pt", broken)


def _ps_rows(root: Path, shard: int, shards: int, work: Path) -> dict:
    """Shard `shard`'s checkpoint of step 4 under `root`, restored into a fresh shard, as
    bytes: per table every row (with its Adagrad state) and the pushes pending, in the order
    they are applied (client by client, each client's in its order)."""
    from heterps_exec.ps import checkpoint as ps_checkpoint
    from heterps_exec.ps.shard import Shard
    from heterps_exec.ps.spec import ShardConfig
    fresh = Shard(ShardConfig(shard=shard, num_shards=shards, work_dir=str(work)))
    assert ps_checkpoint.restore(fresh, str(root / "ps"), 3) == 3
    out = {"applied": fresh.step}
    for t in fresh.tables:
        ids = np.arange(shard, t.spec.rows, shards, dtype=np.int64)
        pending = sorted(t.pending, key=lambda p: (p[0], p[1]))
        out[t.spec.name] = (t.tiers.peek(t.keys_of(ids)).tobytes(),
                            [(s, c, t.ids_of(k).tobytes(), g.tobytes()) for s, c, k, g in pending])
    fresh.close()
    return out


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
