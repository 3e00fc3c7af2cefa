"""Random operations besides dropout (tests/fixtures/ctr_models/random_ops.py: Dropout1d,
nn.MultiheadAttention's and F.scaled_dot_product_attention's dropout, AlphaDropout) are seeded
per (seed, step, microbatch, call) as dropout is: stages cut anywhere draw the eager module's
masks, and a pipelined, replicated run ends with single-process training's weights (1e-5)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import torch
import yaml
from torch.nn import functional as F  # noqa: N812

from heterps_exec.model.dropout import (
    EagerDropout,
    microbatch,
    seeded_alpha_dropout,
    seeded_dropout,
    seeded_feature_dropout,
)
from heterps_exec.model.user_model import run_entry, user_stage, whole_model
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from tests.exec.helpers import run_three_steps_exactly
from tests.exec.model.test_messy_models import batch_for, plan_for

SCENARIO = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models" / "random_ops.yaml"


def scenario(tmp_path: Path, **kwargs) -> Path:
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["model"]["kwargs"].update(kwargs)
    path = tmp_path / "random_ops.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def stages_and_whole(path: Path, cuts: list[int]):
    loaded = load_input(path)
    plan = plan_from_dict(plan_for(list(loaded.problem.layer_names), cuts))
    spec = types.SimpleNamespace(user_model=run_entry(loaded.scenario.model, str(path), plan),
                                 seed=3)
    stages = [user_stage(spec, plan, g, torch.device("cpu"), "none")
              for g in range(len(plan.stages))]
    return whole_model(spec), stages


def piped(stages, env):
    """The stages' summed loss on env, and the gradients they leave."""
    sent, message, grad_out, leaves = env, None, None, []
    for module, cut_in, cut_out in stages:
        if cut_in is not None:
            sent, leaf = cut_in.decode(message)
            leaves.append((leaf, grad_out))
        out, loss = module(sent)
        if cut_out is not None:
            message, grad_out = cut_out.encode(out)
    loss.backward()
    for leaf, g in reversed(leaves):
        if g is not None:
            g.backward(leaf.grad)
    return float(loss.detach()), {k: p.grad for s in stages for k, p in s[0].named_parameters()}


def stages_draw_as_the_eager_module(whole, stages, calls: int) -> None:
    """Under three (seed, step, microbatch) keys the stages' loss and gradients equal the
    eager module's, whose forward seeded `calls` random calls; another key draws otherwise."""
    env = batch_for(whole.cap, 16)
    losses = set()
    for key in [(3, 1, 0), (3, 1, 1), (3, 2, 0)]:
        whole.zero_grad()
        for s in stages:
            s[0].zero_grad()
        with microbatch(*key), EagerDropout() as eager:
            _, want = whole(env)
        want.backward()
        assert eager.count == calls  # every random call of the eager forward was seeded
        with microbatch(*key):
            got, grads = piped(stages, env)
        assert got == pytest.approx(float(want.detach()), rel=1e-6)
        ref = dict(whole.named_parameters())
        for k, g in grads.items():
            assert torch.allclose(g, ref[k].grad, atol=1e-6), k
        losses.add(round(got, 6))
    assert len(losses) == 3  # another microbatch or step: other masks


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "softmax-dropout"])
def test_stages_draw_the_eager_modules_masks_per_microbatch(tmp_path, need_weights):
    whole, stages = stages_and_whole(scenario(tmp_path, need_weights=need_weights), [1])
    # field dropout | attention (1 call), proj, fc: sdpa + alpha dropout
    assert [s[0].dropouts for s in stages] == [1, 3]
    stages_draw_as_the_eager_module(whole, stages, calls=4)


def test_seeded_masks_keep_each_ops_rules():
    x = torch.ones(400, 6, 5)
    with microbatch(0, 0, 0):
        y = seeded_feature_dropout(x, 0.5, True, 0)
        a = seeded_alpha_dropout(torch.randn(40000, generator=torch.Generator().manual_seed(0)),
                                 0.2, True, 1)
        again = seeded_feature_dropout(x, 0.5, True, 0)
    assert torch.equal(y, again)  # the same key, the same mask
    assert ((y == 0) | (y == 2)).all() and (y == y[:, :, :1]).all()  # whole channels
    assert 0.4 < float((y == 0).float().mean()) < 0.6
    # alpha dropout keeps a standard normal's mean and variance (its affine correction)
    assert abs(float(a.mean())) < 0.03 and abs(float(a.std()) - 1) < 0.03
    dropped = a.mode().values  # every dropped unit takes the same value
    assert 0.18 < float((a == dropped).float().mean()) < 0.22
    with microbatch(0, 0, 0), EagerDropout() as eager:
        z = F.dropout2d(x.unsqueeze(-1), 0.5).squeeze(-1)
    assert torch.equal(z, y) and eager.count == 1
    assert torch.equal(seeded_feature_dropout(x, 0.5, False, 0), x)  # eval: untouched
    assert torch._VF.feature_dropout is torch.feature_dropout  # swapped back


RUNS = [([1, 3], [1, 2, 1], "1f1b", False), ([2], [2, 1], "gpipe", True)]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("cuts,replicas,schedule,need_weights", RUNS,
                         ids=["1-2-1-1f1b", "2-1-gpipe-weights"])
def test_random_ops_train_like_one_process(tmp_path, cuts, replicas, schedule, need_weights):
    path = scenario(tmp_path, need_weights=need_weights)
    plan = plan_for(list(load_input(path).problem.layer_names), cuts, replicas)
    plan.update(schedule=schedule, num_microbatches=4)
    run_three_steps_exactly(tmp_path, path, plan)


DRAWS = SCENARIO.with_name("random_draws.yaml")


@pytest.mark.parametrize("cuts", [[1], [2, 3]], ids=["after-embedding", "around-fc-drop"])
def test_inplace_dropout_and_draws_in_forward_match_the_eager_module(tmp_path, cuts):
    """F.dropout(inplace=True), nn.Dropout(inplace=True), torch.randn_like, torch.bernoulli and
    torch.rand (tests/fixtures/ctr_models/random_ops.py:InPlaceAndDraws): stages cut anywhere
    draw what the eager module draws under the same key, another key draws otherwise."""
    assert load_input(DRAWS).problem.layer_names == ("embedding", "fc", "mid", "out", "loss")
    whole, stages = stages_and_whole(DRAWS, cuts)
    assert sum(s[0].dropouts for s in stages) == 5
    stages_draw_as_the_eager_module(whole, stages, calls=5)


def test_seeded_draws_keep_torchs_distributions():
    from heterps_exec.model.draws import seeded_bernoulli, seeded_rand, seeded_randn_like
    x = torch.zeros(20000)
    with microbatch(0, 0, 0):
        a, again = seeded_randn_like(x, 0), seeded_randn_like(x, 0)
        other = seeded_randn_like(x, 1)
        u = seeded_rand([20000], 2)
        b = seeded_bernoulli(torch.full_like(x, 0.3), 3)
        c = seeded_bernoulli(x, 4, 0.7)
    assert torch.equal(a, again) and not torch.equal(a, other)
    assert abs(float(a.mean())) < 0.03 and abs(float(a.std()) - 1) < 0.03
    assert 0 <= float(u.min()) and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.01
    assert set(b.unique().tolist()) == {0.0, 1.0} and abs(float(b.mean()) - 0.3) < 0.02
    assert abs(float(c.mean()) - 0.7) < 0.02
    y = torch.ones(100, 8)
    with microbatch(0, 0, 0), EagerDropout() as eager:
        z = F.dropout(y, 0.5, True, inplace=True)
    assert z is y and eager.count == 1  # in place, as torch does
    with microbatch(0, 0, 0):  # the out-of-place op's mask
        assert torch.equal(z, seeded_dropout(torch.ones(100, 8), 0.5, True, 0))
    assert torch._VF.dropout_ is torch.dropout_  # swapped back


def test_an_unseeded_draw_is_refused_in_one_line_naming_module_and_line(tmp_path, capsys):
    """An in-place fill (torch.empty_like(h).normal_()) draws from the rank's own generator:
    `heterps-exec run` refuses the model before starting any rank."""
    doc = yaml.safe_load(DRAWS.read_text())
    doc["model"]["kwargs"]["unseeded"] = True
    path = tmp_path / "draws.yaml"
    path.write_text(yaml.safe_dump(doc))
    plan = plan_for(list(load_input(path).problem.layer_names), [2])
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    from heterps_exec.cli import main
    code = main(["run", str(tmp_path / "plan.json"), "--scenario", str(path),
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "model.module: module (root) (random_ops.py:" in err and "calls normal_" in err, err
    line = int(err.split("random_ops.py:")[1].split(")")[0])
    source = (Path(__file__).resolve().parents[2] / "fixtures/ctr_models/random_ops.py")
    assert ".normal_(" in source.read_text().splitlines()[line - 1]
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_inplace_dropout_and_draws_train_like_one_process(tmp_path):
    plan = plan_for(list(load_input(DRAWS).problem.layer_names), [1, 3], [1, 2, 1])
    plan.update(schedule="1f1b", num_microbatches=4)
    run_three_steps_exactly(tmp_path, DRAWS, plan)
