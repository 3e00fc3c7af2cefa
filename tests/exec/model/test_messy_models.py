"""Models as people write them (tests/fixtures/ctr_models/messy.py) in the engine: stages
cut from each one's captured graph give the eager module's loss and gradients, the stages'
state dicts add up to the module's whole state dict (unused parameters included), and a run
through `heterps-exec run` ends with single-process training's weights (1e-5) and scores its
held-out rows from the saved state."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from heterps_exec.model.user_model import run_entry, user_stage, whole_model
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.torch_model.capture import example_tensor
from tests.exec.helpers import assert_matches_reference, run_exec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models"
CPU = "xeon-icelake-16vcpu"
FIELDS = [10, 20, 30]
IDS = {"name": "ids", "shape": [3], "dtype": "int64", "cardinality": FIELDS}
CASES = {
    "unused": {"module": "UnusedLinear"},
    "attention": {"module": "AttentionDropsWeights", "layers": ["attn"]},
    "old-tensor": {"module": "OldTensorParam"},
    "moves-itself": {"module": "MovesItself"},
    "probabilities": {"module": "Probabilities"},
    "float-ids": {"module": "FloatIds", "kwargs": {"rows": 7, "embed_dim": 4, "num_dense": 2},
                  "inputs": [{"name": "x", "shape": [3], "range": [0, 7]}]},
    "shared-act": {"module": "SharedActivation"},
}


def scenario(tmp_path: Path, case: str, **model) -> Path:
    """messy.yaml with the case's model (module, kwargs, inputs, layers, output)."""
    doc = yaml.safe_load((FIXTURES / "messy.yaml").read_text())
    changes = {**CASES[case], **model}
    doc["model"]["module"] = f"tests.fixtures.ctr_models.messy:{changes.pop('module')}"
    doc["model"].update(changes)
    path = tmp_path / f"{case}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def plan_for(names: list[str], cuts: list[int], replicas: list[int] | None = None):
    bounds = [0, *cuts, len(names)]
    replicas = replicas or [1] * (len(bounds) - 1)
    return {"format_version": 1, "num_microbatches": 2, "schedule": "1f1b",
            "stages": [{"layers": names[a:b], "resource": CPU, "num_replicas": k}
                       for a, b, k in zip(bounds[:-1], bounds[1:], replicas, strict=True)]}


def batch_for(cap, n: int, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = {r.name: example_tensor(r, n, generator=gen).reshape(n, -1)
           for r in (*cap.inputs, cap.label)}
    return {k: (v.float() if v.is_floating_point() else v.long()) for k, v in out.items()}


def chained(path: Path, cuts: list[int]):
    """(eager module after one backward, stages after one backward, their loss) on a batch."""
    loaded = load_input(path)
    plan = plan_from_dict(plan_for(list(loaded.problem.layer_names), cuts))
    entry = run_entry(loaded.scenario.model, str(path), plan)
    spec = types.SimpleNamespace(user_model=entry, seed=3)
    whole = whole_model(spec)
    env = batch_for(whole.cap, 16)
    _, want = whole(env)
    want.backward()
    stages = [user_stage(spec, plan, g, torch.device("cpu"), "none")
              for g in range(len(plan.stages))]
    sent, leaves, message, grad_out = env, [], None, None
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
    assert float(loss.detach()) == pytest.approx(float(want.detach()), rel=1e-6)
    return whole, [s[0] for s in stages]


def assert_same_training(whole, stages) -> None:
    """Every parameter's gradient, and the whole state dict, as the eager module's."""
    got = {k: p.grad for m in stages for k, p in m.named_parameters()}
    ref = dict(whole.named_parameters())
    for k, g in got.items():
        assert torch.allclose(g, ref[k].grad, atol=1e-6), k
    assert all(ref[k].grad is None for k in set(ref) - set(got))
    state = {k: v for m in stages for k, v in m.state_dict().items()}
    want = whole.state_dict()
    assert sorted(state) == sorted(want)
    for k, v in want.items():
        assert torch.equal(state[k], v), k


def test_an_unused_submodule_is_kept_in_the_state_but_never_trained(tmp_path):
    whole, stages = chained(scenario(tmp_path, "unused"), [2])
    assert_same_training(whole, stages)
    assert "linear.weight" in stages[0].state_dict()
    assert "linear.weight" not in dict(stages[0].named_parameters())  # nothing trains it
    assert "offsets" not in stages[0].state_dict()  # non-persistent, as in the eager module


@pytest.mark.parametrize("layers, cuts", [("leaf", [2, 3]), (["attn"], [2, 3])],
                         ids=["leaf", "attn-one-layer"])
def test_attention_with_weights_thrown_away_cuts_anywhere(tmp_path, layers, cuts):
    """The attention weights nobody reads are in no layer; the residual added in place to
    the attention output (`h += e`) runs on a copy when that output arrives over a cut."""
    whole, stages = chained(scenario(tmp_path, "attention", layers=layers), cuts)
    assert_same_training(whole, stages)


def test_a_shared_activation_joins_each_layer_it_follows(tmp_path):
    """`self.act` runs after fc and after mid: grouped, each call is in the layer it follows,
    so a cut after fc ships the activated output, and the stages train like the module."""
    path = scenario(tmp_path, "shared-act")
    assert load_input(path).problem.layer_names == ("embedding", "fc", "mid", "out", "loss")
    whole, stages = chained(path, [1, 2])
    assert_same_training(whole, stages)


@pytest.mark.parametrize("case", ["old-tensor", "moves-itself"])
def test_modules_ignoring_the_meta_device_train_like_the_eager_module(tmp_path, case):
    whole, stages = chained(scenario(tmp_path, case), [1, 2])
    assert_same_training(whole, stages)


def test_an_op_with_no_meta_kernel_trains_like_the_eager_module(tmp_path):
    """torch.bincount (messy.py:BatchFrequency) cannot run on the meta device: the run's
    check measures the model on the CPU instead, and the stages train like the module."""
    whole, stages = chained(scenario(tmp_path, "unused", module="BatchFrequency"), [1, 2])
    assert_same_training(whole, stages)


def test_a_model_returning_probabilities_trains_on_them_as_they_are(tmp_path, capsys,
                                                                   monkeypatch):
    """Detected (forward ends in a sigmoid), said once, and the built-in bce reads the output
    as a probability: no second sigmoid."""
    from heterps_sim.inputs.torch_model import losses, notices
    monkeypatch.setattr(notices, "SAID", set())
    whole, stages = chained(scenario(tmp_path, "probabilities"), [2])
    assert_same_training(whole, stages)
    assert whole.cap.output == "probabilities" and whole.cap.loss is losses.bce_probabilities
    assert "ends in a sigmoid, so its output is read as probabilities" in capsys.readouterr().err
    declared = scenario(tmp_path, "probabilities", output="logits")  # the user says otherwise
    loaded = load_input(declared)
    entry = run_entry(loaded.scenario.model, str(declared),
                      plan_from_dict(plan_for(list(loaded.problem.layer_names), [])))
    assert entry["section"]["output"] == "logits"
    assert whole_model(types.SimpleNamespace(user_model=entry, seed=3)).cap.loss is losses.bce


def test_log_loss_of_probabilities_is_that_of_their_logits():
    from heterps_exec.data.score import log_loss, log_loss_of_probabilities
    gen = np.random.default_rng(0)
    z, y = gen.normal(size=200), gen.integers(0, 2, 200)
    p = 1 / (1 + np.exp(-z))
    assert log_loss_of_probabilities(y, p) == pytest.approx(log_loss(y, z), rel=1e-12)
    assert np.isfinite(log_loss_of_probabilities(np.array([1, 0]), np.array([0.0, 1.0])))


def test_synthetic_data_draws_a_float_input_inside_its_declared_range(tmp_path):
    """The float column FloatIds casts to ids (range [0, 7]) is drawn from [0, 7), never
    standard normal (negative ids: an index error in rank 0); both held-out and training."""
    from heterps_exec.data.synthetic import BatchStream, generate_dataset
    from heterps_exec.model.user_model import data_graph
    path = scenario(tmp_path, "float-ids")
    loaded = load_input(path)
    entry = run_entry(loaded.scenario.model, str(path),
                      plan_from_dict(plan_for(list(loaded.problem.layer_names), [])))
    graph = data_graph(entry)
    generate_dataset(graph, tmp_path / "data", num_samples=2000, seed=1, holdout_samples=500)
    for folder in (tmp_path / "data", tmp_path / "data" / "holdout"):
        x = np.load(folder / "x.npy")
        assert x.dtype == np.float32 and x.min() >= 0 and x.max() < 7
        assert set(np.unique(x.astype(np.int64))) == set(range(7))  # every id drawn
    label = np.load(tmp_path / "data" / "label.npy")
    assert 0.2 < label.mean() < 0.8  # the range is centred in the logit: both classes
    BatchStream(tmp_path / "data", batch_size=64, graph=graph)  # the same model's dataset
    whole, stages = chained(path, [2])
    assert_same_training(whole, stages)


def direct_log_loss(run_dir: Path, state: Path) -> float:
    """The held-out log-loss computed here: the eager module with the saved weights on the
    held-out rows, -mean(y log p + (1 - y) log(1 - p)) in numpy, p read per the output kind."""
    from heterps_exec.data.readers import holdout_batches
    from heterps_exec.runtime.layout import RunSpec
    spec = RunSpec.load(run_dir / "spec.json")
    model = whole_model(spec)
    model.load_state_dict(torch.load(state))
    model.eval()
    ys, outs = [], []
    with torch.no_grad():
        for batch in holdout_batches(spec):
            env, _ = model({k: torch.from_numpy(np.asarray(v)) for k, v in batch.items()})
            outs.append(env["output"].reshape(-1).double().numpy())
            ys.append(np.asarray(batch["label"], np.float64).reshape(-1))
    y, out = np.concatenate(ys), np.concatenate(outs)
    p = out if spec.user_model["section"]["output"] == "probabilities" else 1 / (1 + np.exp(-out))
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def write_plan(tmp_path: Path, path: Path, cuts: list[int], replicas: list[int]) -> Path:
    names = list(load_input(path).problem.layer_names)
    plan = tmp_path / f"{path.stem}-plan.json"
    plan.write_text(json.dumps(plan_for(names, cuts, replicas)))
    return plan


RUNS = [("unused", [2], [1, 1]), ("attention", [3], [2, 1]), ("moves-itself", [1], [1, 1]),
        ("probabilities", [2], [1, 2]), ("float-ids", [1], [1, 1])]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("case,cuts,replicas", RUNS, ids=[r[0] for r in RUNS])
def test_messy_model_trains_exactly_and_scores_its_holdout(tmp_path, case, cuts, replicas):
    path = scenario(tmp_path, case)
    plan = write_plan(tmp_path, path, cuts, replicas)
    code, out, err = run_exec("run", str(plan), "--scenario", str(path), "--out",
                              str(tmp_path / "run"), "--rank-timeout", "90", "--json",
                              "--steps", "3", "--lr", "0.1", "--save-state",
                              str(tmp_path / "state.pt"))
    assert code == 0, err
    result = json.loads(out)
    holdout = result["extra"]["holdout"]
    assert holdout["rows"] > 0
    assert holdout["output"] == ("probabilities" if case == "probabilities" else "logits")
    assert holdout["log_loss"] == pytest.approx(
        direct_log_loss(tmp_path / "run", tmp_path / "state.pt"), rel=1e-9)
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
