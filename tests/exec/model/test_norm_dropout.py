"""BatchNorm and dropout in a user model (tests/fixtures/ctr_models/messy.py:NormDropout)
train as one process does: the captured stages draw the eager module's dropout masks for the
same (seed, step, microbatch, layer), and a pipelined run with a replicated stage ends with
the oracle's weights AND running statistics (1e-5; runtime/reference.py runs the microbatches
in order, model/batchnorm.py sums a replicated stage's updates to the same values)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from heterps_exec.model.batchnorm import RunningStats
from heterps_exec.model.dropout import EagerDropout, microbatch
from heterps_exec.model.user_model import run_entry, user_stage, whole_model
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from tests.exec.helpers import assert_matches_reference
from tests.exec.model.test_messy_models import batch_for, plan_for
from tests.exec.model.test_user_model_runs import run, write_plan

SCENARIO = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models" / "normdrop.yaml"


def stages_and_whole():
    loaded = load_input(SCENARIO)
    plan = plan_from_dict(plan_for(list(loaded.problem.layer_names), [2]))
    spec = types.SimpleNamespace(user_model=run_entry(loaded.scenario.model, str(SCENARIO), plan),
                                 seed=3)
    stages = [user_stage(spec, plan, g, torch.device("cpu"), "none") for g in range(2)]
    return whole_model(spec), stages


def piped_loss(stages, env) -> float:
    (first, _, cut), (second, cut_in, _) = stages
    out, _ = first(env)
    sent, _ = cut_in.decode(cut.encode(out)[0])
    return float(second(sent)[1].detach())


def test_stages_draw_the_eager_modules_masks_per_microbatch():
    whole, stages = stages_and_whole()
    assert [s[0].dropouts for s in stages] == [1, 1]  # one Dropout on each side of the cut
    env = batch_for(whole.cap, 16)
    losses = {}
    for key in [(3, 1, 0), (3, 1, 1), (3, 2, 0)]:
        with torch.no_grad(), microbatch(*key), EagerDropout():
            want = float(whole(env)[1])
        with torch.no_grad(), microbatch(*key):
            assert piped_loss(stages, env) == pytest.approx(want, rel=1e-6)
        losses[key] = want
    assert len(set(losses.values())) == 3  # another microbatch or step: other masks


def test_replicas_summed_running_statistics_are_the_sequential_ones(monkeypatch):
    """Microbatches 0..3 split over two 'replicas' (copies of the stage, in either order):
    the summed terms give the statistics one module reaches running them in order."""
    whole, stages = stages_and_whole()
    env = batch_for(whole.cap, 32)
    parts = [{k: v[8 * i:8 * i + 8] for k, v in env.items()} for i in range(4)]
    with torch.no_grad():
        for part in parts:
            whole(part)
    module = stages[0][0]
    stats = RunningStats.of(module, 4)
    with torch.no_grad():
        for mu in (3, 1, 2, 0):
            with stats.microbatch(mu):
                module(parts[mu])
    # one process holds every term: the all-reduce's sum is already there
    monkeypatch.setattr("torch.distributed.all_reduce", lambda flat, group=None: None)
    stats.sync(None, torch.device("cpu"))
    want = whole.state_dict()
    for key in ("mlp.1.running_mean", "mlp.1.running_var", "mlp.1.num_batches_tracked"):
        assert torch.allclose(module.state_dict()[key].float(), want[key].float(), atol=1e-6), key


def test_overlapping_steps_keep_their_terms_apart():
    """Async: a replica runs step 1's forwards before step 0 ends. Terms kept per step and
    set in step order give the statistics of one module running steps 0 and 1 in order."""
    whole, stages = stages_and_whole()
    env = batch_for(whole.cap, 64)
    parts = [{k: v[8 * i:8 * i + 8] for k, v in env.items()} for i in range(8)]
    with torch.no_grad():
        for part in parts:
            whole(part)
    module = stages[0][0]
    stats = RunningStats.of(module, 4)
    with torch.no_grad():
        for mu in (0, 1, 4, 2, 5, 3, 6, 7):  # global microbatch index: step mu // 4
            with stats.microbatch(mu, mu // 4):
                module(parts[mu])
    for step in (0, 1):
        flat, forwards = stats.take(step, torch.device("cpu"))
        assert forwards == 4 and flat.numel() == stats.size()
        stats.apply(flat, forwards)
    want = whole.state_dict()
    for key in ("mlp.1.running_mean", "mlp.1.running_var", "mlp.1.num_batches_tracked"):
        assert torch.allclose(module.state_dict()[key].float(), want[key].float(), atol=1e-6), key


RUNS = [([2, 1], "1f1b"), ([1, 2], "gpipe"), ([1, 1], "async"), ([2, 1], "async")]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("replicas,schedule", RUNS, ids=["2-1-1f1b", "1-2-gpipe", "1-1-async",
                                                       "2-1-async"])
def test_batchnorm_and_dropout_train_like_one_process(tmp_path, replicas, schedule):
    plan = write_plan(tmp_path / "plan.json", SCENARIO, [2], replicas, schedule)
    result = run(tmp_path, SCENARIO, plan, "--steps", "3", "--lr", "0.1", "--save-state",
                 str(tmp_path / "state.pt"))
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
    state = torch.load(tmp_path / "state.pt")
    assert int(state["mlp.1.num_batches_tracked"]) == 3 * 4  # m updates per step
