"""A user's PyTorch model in the engine: stages cut from its captured graph train exactly
like the eager module (in-process here; through torchrun, with replicas, schedules, the
parameter server and checkpoints moving between plans, in test_user_model_runs.py)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from heterps_exec.model.user_model import run_entry, user_stage, whole_model
from heterps_exec.model.user_stage import UserStage
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.torch_model.capture import CaptureError
from heterps_sim.inputs.torch_model.section import LABEL

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "ctr_models"


def plan_for(names: list[str], cuts: list[int], resource: str = "xeon-icelake-16vcpu"):
    bounds = [0, *cuts, len(names)]
    return plan_from_dict({"format_version": 1, "num_microbatches": 2, "schedule": "1f1b",
                           "stages": [{"layers": names[a:b], "resource": resource,
                                       "num_replicas": 1} for a, b in zip(bounds, bounds[1:])]})


def batch_for(entry, cap, n: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Raw [n, width] rows as the engine's data stream hands them over."""
    from heterps_sim.inputs.torch_model.capture import example_tensor
    gen = torch.Generator().manual_seed(seed)
    out = {r.name: example_tensor(r, n, generator=gen).reshape(n, -1)
           for r in (*cap.inputs, cap.label)}
    return {k: (v.float() if v.is_floating_point() else v.long()) for k, v in out.items()}


@pytest.mark.parametrize("scenario, cuts", [("deepfm.yaml", [1, 3, 5]), ("dcn.yaml", [2, 3])])
def test_stages_chained_by_hand_equal_the_eager_module(scenario, cuts):
    """Forward through every stage with each cut encoded and decoded on the wire, backward
    through the cuts: the loss and every parameter gradient equal the eager module's."""
    path = str(FIXTURES / scenario)
    loaded = load_input(path)
    plan = plan_for(list(loaded.problem.layer_names), cuts)
    entry = run_entry(loaded.scenario.model, path, plan)
    spec = types.SimpleNamespace(user_model=entry, seed=3)
    whole = whole_model(spec)
    env = batch_for(entry, whole.cap, 16)
    _, want = whole(env)
    want.backward()
    stages = [user_stage(spec, plan, g, torch.device("cpu"), "none")
              for g in range(len(plan.stages))]
    sent, leaves = env, []
    message = grad_out = None  # the last cut's forward message and its grad section
    for module, cut_in, cut_out in stages:
        if cut_in is not None:
            sent, leaf = cut_in.decode(message)
            leaves.append((leaf, grad_out, cut_in))
        out, loss = module(sent)
        if cut_out is not None:
            message, grad_out = cut_out.encode(out)
    assert float(loss.detach()) == pytest.approx(float(want.detach()), rel=1e-6)
    loss.backward()
    for leaf, grad_out, _ in reversed(leaves):
        if grad_out is not None:
            grad_out.backward(leaf.grad)
    got = {k: p.grad for module, _, _ in stages for k, p in module.named_parameters()}
    ref = dict(whole.named_parameters())
    assert sorted(got) == sorted(ref)
    for k, g in got.items():
        assert torch.allclose(g, ref[k].grad, atol=1e-6), k


def test_stage_parameters_keep_their_original_names():
    path = str(FIXTURES / "deepfm.yaml")
    loaded = load_input(path)
    names = list(loaded.problem.layer_names)
    plan = plan_for(names, [1, 4])
    entry = run_entry(loaded.scenario.model, path, plan)
    spec = types.SimpleNamespace(user_model=entry, seed=0)
    module = user_stage(spec, plan, 0, torch.device("cpu"), "none")[0]
    assert isinstance(module, UserStage)
    assert list(module.state_dict()) == ["embedding.embedding.weight"]
    assert isinstance(module.get_submodule("embedding.embedding"), torch.nn.EmbeddingBag)
    # the table starts from the rows a parameter-server shard would create
    from heterps_exec.model.rows import initial_rows
    rows = initial_rows("embedding.embedding", range(5), 8, 0)
    assert torch.equal(module.embedding.embedding.weight[:5], torch.from_numpy(rows))
    # the label and the raw ids (the linear term still reads them) cross the first cut
    cut = user_stage(spec, plan, 1, torch.device("cpu"), "none")[1]
    assert {(t.name, t.kind) for t in cut.tensors} >= {("ids", "int"), (LABEL, "plain")}


def test_a_plan_that_splits_a_shared_parameter_is_refused():
    """`scale` is read after layer a (by b's input) and after b (by the loss): a plan that
    puts b and the loss in different stages is one line of bad input."""
    from heterps_sim.inputs.torch_model import section_model_spec
    from heterps_sim.inputs.torch_model.section import TorchModelSection
    section = TorchModelSection.model_validate({
        "module": "tests.fixtures.ctr_models.broken:SharedScale",
        "inputs": [{"name": "x", "shape": [4]}]})
    names = [la.name for la in section_model_spec(section, source="s.yaml").layers]
    assert names == ["a", "b", "loss"]
    run_entry(section, "s.yaml", plan_for(names, [1]))  # a | b, loss: fine
    with pytest.raises(CaptureError, match=r"s.yaml: plan: parameter 'scale' is read by stages \[0, 1\]"):
        run_entry(section, "s.yaml", plan_for(names, [2]))


def test_table_scale_is_refused_for_user_models():
    path = str(FIXTURES / "deepfm.yaml")
    loaded = load_input(path)
    plan = plan_for(list(loaded.problem.layer_names), [])
    with pytest.raises(CaptureError, match="--table-scale"):
        run_entry(loaded.scenario.model, path, plan, table_scale=0.5)
