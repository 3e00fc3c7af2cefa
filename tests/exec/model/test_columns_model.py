"""A model built from feature columns (tests/fixtures/ctr_models/columns.py: one float input
whose first columns are ids, probabilities out, an L2 term added outside forward, moving
itself to a device in __init__) in the engine: stages give the eager module's loss and
gradients, each stage's replica 0 adds the extra loss's gradient of its own parameters so
the stages together add the whole term's, the data readers draw and read such a column
layout, and `heterps-exec run` ends with single-process training's weights (1e-5) and the
held-out log-loss computed here."""

from __future__ import annotations

import copy
import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from heterps_exec.data.columns import ColumnMap, resolve
from heterps_exec.data.sources import FactoryMap
from heterps_exec.data.synthetic import BatchStream, DatasetError, RawTensor, generate_dataset
from heterps_exec.model.user_model import (
    _meta_chain,
    data_graph,
    run_entry,
    user_stage,
    whole_model,
)
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.torch_model.capture import CaptureError
from tests.exec.helpers import run_three_steps_exactly
from tests.exec.model.test_messy_models import (
    assert_same_training,
    chained,
    direct_log_loss,
    plan_for,
)
from tests.exec.model.test_user_model_runs import trains_exactly_on_parquet

SCENARIO = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models" / "columns.yaml"
CARDS = (40, 25)


def entry_for(cuts: list[int], replicas=None, schedule="1f1b", ps_shards=0):
    loaded = load_input(SCENARIO)
    plan = plan_for(list(loaded.problem.layer_names), cuts, replicas)
    plan["schedule"] = schedule
    plan = plan_from_dict(plan)
    return run_entry(loaded.scenario.model, str(SCENARIO), plan, ps_shards=ps_shards), plan


def test_stages_train_like_the_eager_module():
    whole, stages = chained(SCENARIO, [2, 4])  # embeddings | wide, deep.0 | deep.2, loss
    assert_same_training(whole, stages)
    assert whole.cap.output == "probabilities"


def test_the_stages_extra_loss_gradients_add_up_to_the_whole_terms():
    entry, plan = entry_for([1, 3])
    spec = types.SimpleNamespace(user_model=entry, seed=3)
    whole = whole_model(spec)
    want_value = whole.extra_loss()
    want = {k: p.grad.clone() for k, p in whole.named_parameters() if p.grad is not None}
    assert sorted(want) == ["embeddings.item.weight", "embeddings.user.weight"]
    got, values = {}, []
    for g in range(len(plan.stages)):
        stage = user_stage(spec, plan, g, torch.device("cpu"), "none")[0]
        values.append(stage.extra_loss())
        got.update({k: p.grad for k, p in stage.named_parameters() if p.grad is not None})
    assert sorted(got) == sorted(want)
    for k, g in want.items():
        assert torch.allclose(got[k], g, atol=1e-7), k
        assert torch.allclose(g, 2 * 0.01 * whole.state_dict()[k]), k  # d(l2 |w|^2)/dw
    assert values == pytest.approx([want_value] * 3)  # each rank sees the whole term's value


def test_extra_loss_is_refused_where_it_is_not_applied():
    with pytest.raises(CaptureError, match=r"model\.extra_loss: not applied under --ps-shards"):
        entry_for([2], ps_shards=1)
    entry_for([2], schedule="async")  # applied at the version each step reads


def test_the_async_term_goes_to_the_version_the_step_reads():
    """A stage's term given another version's tensors (as the async forward gives it) adds
    fn's gradient at that version to them, not to the live parameters, as the oracle's whole
    model does with the same version."""
    from heterps_exec.runtime.reference import reading
    entry, plan = entry_for([1, 3], schedule="async")
    spec = types.SimpleNamespace(user_model=entry, seed=3)
    stage = user_stage(spec, plan, 0, torch.device("cpu"), "none")[0]
    whole = whole_model(spec)
    read = {n: (p.detach() * 2.0).requires_grad_() for n, p in whole.named_parameters()}
    with reading(whole, read):
        whole.extra_loss(read)
    named = [(n, p) for n, p in stage.named_parameters() if p.requires_grad]
    version = {n: (p.detach() * 2.0).requires_grad_() for n, p in named}
    stage.extra_loss([version[n] for n, _ in named])
    assert all(p.grad is None for _, p in named)
    assert list(version) == ["embeddings.user.weight"]  # stage 0: the user table
    for n in version:
        assert torch.allclose(version[n].grad, read[n].grad, atol=1e-7), n
        assert torch.allclose(version[n].grad, 2 * 0.01 * version[n].detach()), n


def test_a_term_mixing_two_stages_is_refused_for_a_plan_that_separates_them(tmp_path):
    import yaml
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["model"]["extra_loss"] = "tests.fixtures.ctr_models.columns:mixed_penalty"
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(doc))
    loaded = load_input(path)
    names = list(loaded.problem.layer_names)
    with pytest.raises(CaptureError, match=r"model\.extra_loss: tests\.fixtures\.ctr_models\."
                       r"columns:mixed_penalty cannot be split over this plan's stages: its "
                       r"gradient for 'embeddings\.user\.weight' \(stage 0\) changes"):
        run_entry(loaded.scenario.model, str(path), plan_from_dict(plan_for(names, [3])))
    whole_plan = plan_from_dict(plan_for(names, []))  # one stage: nothing to split
    assert run_entry(loaded.scenario.model, str(path), whole_plan)["section"]["extra_loss"]
    entry_for([3])  # the per-table L2 splits over any plan


def test_synthetic_data_draws_whole_ids_below_each_columns_cardinality(tmp_path):
    graph = data_graph(entry_for([])[0])
    generate_dataset(graph, tmp_path / "data", num_samples=3000, seed=1, holdout_samples=500)
    for folder in (tmp_path / "data", tmp_path / "data" / "holdout"):
        x = np.load(folder / "features.npy")
        assert x.dtype == np.float32 and x.shape[1] == 6
        ids = x[:, :2]
        assert (ids == np.floor(ids)).all() and ids.min() >= 0
        assert [len(np.unique(ids[:, k])) for k in range(2)] == list(CARDS)  # all drawn
        assert (ids[:, 0] < CARDS[0]).all() and (ids[:, 1] < CARDS[1]).all()
        assert abs(x[:, 2:].mean()) < 0.1 and 0.9 < x[:, 2:].std() < 1.1  # dense: N(0, 1)
    label = np.load(tmp_path / "data" / "label.npy")
    assert 0.2 < label.mean() < 0.8
    BatchStream(tmp_path / "data", batch_size=64, graph=graph)  # this model's dataset
    meta = json.loads((tmp_path / "data" / "meta.json").read_text())
    meta["tensors"][0]["id_columns"] = [40]  # another layout: refused
    (tmp_path / "data" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="was made for model"):
        BatchStream(tmp_path / "data", batch_size=64, graph=graph)


def test_file_readers_hash_the_categorical_columns_into_the_id_columns():
    raw = [RawTensor("features", "features", 5, "float32", id_columns=CARDS),
           RawTensor("label", "label", 1, "float32")]
    columns = resolve(raw, {}, ["label", "I1", "I2", "I3", "C1", "C2"],
                      numeric=["I1", "I2", "I3"], categorical=["C1", "C2"])
    assert columns == {"features": ["C1", "C2", "I1", "I2", "I3"], "label": ["label"]}
    rng = np.random.default_rng(0)
    n = 500
    data = {"label": rng.integers(0, 2, n).astype(float),
            **{f"I{k}": rng.integers(0, 100, n).astype(float) for k in (1, 2, 3)},
            "C1": rng.integers(0, 2**63, n, dtype=np.uint64),
            "C2": rng.integers(0, 2**63, n, dtype=np.uint64)}
    out, good = ColumnMap(raw, columns)(data)
    x = out["features"]
    assert good.all() and x.dtype == np.float32 and x.shape == (n, 5)
    for k, card in enumerate(CARDS):
        assert (x[:, k] == np.floor(x[:, k])).all() and 0 <= x[:, k].min()
        assert x[:, k].max() < card and len(np.unique(x[:, k])) > card // 2
    assert np.allclose(x[:, 2:], np.log1p(np.stack([data[f"I{k}"] for k in (1, 2, 3)], 1)))


def test_a_factorys_rows_with_ids_outside_their_column_are_malformed():
    raw = [RawTensor("features", "features", 3, "float32", id_columns=(4,)),
           RawTensor("label", "label", 1, "float32")]
    x = np.array([[3, 0.5, 1], [4, 0.5, 1], [1.5, 0, 0], [-1, 0, 0], [0, 2, 2]], float)
    out, good = FactoryMap(raw)({"features": x, "label": np.zeros((5, 1))})
    assert good.tolist() == [True, False, False, False, True]
    assert x[1, 0] == 4  # the caller's array is left as it was


def without_extra_loss(spec):
    """The run spec with model.extra_loss removed (the same run minus the term)."""
    plain = copy.deepcopy(spec)
    plain.user_model["section"]["extra_loss"] = None
    _meta_chain.cache_clear()
    return plain


RUNS = [([2], [1, 2], "gpipe", []), ([3], [2, 1], "1f1b", ["--overlap", "on"]),
        ([2], [2, 1], "async", [])]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("cuts,replicas,schedule,extra", RUNS, ids=["1-2-gpipe", "2-1-1f1b-overlap",
                                                                       "2-1-async"])
def test_columns_model_trains_exactly_and_scores_its_holdout(tmp_path, cuts, replicas,
                                                             schedule, extra):
    from heterps_exec.runtime.layout import RunSpec
    from heterps_exec.runtime.reference import train_reference
    plan = plan_for(list(load_input(SCENARIO).problem.layer_names), cuts, replicas)
    plan.update(schedule=schedule, num_microbatches=4)
    result = run_three_steps_exactly(tmp_path, SCENARIO, plan, *extra)
    holdout = result["extra"]["holdout"]
    assert holdout["output"] == "probabilities" and holdout["rows"] > 0
    assert holdout["log_loss"] == pytest.approx(
        direct_log_loss(tmp_path / "run", tmp_path / "state.pt"), rel=1e-9)
    # the term was applied: the run is not the one without it
    _, plain = train_reference(without_extra_loss(RunSpec.load(tmp_path / "run" / "spec.json")))
    got = torch.load(tmp_path / "state.pt")
    assert float((got["embeddings.user.weight"] - plain["embeddings.user.weight"]).abs().max()) > 1e-4


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_columns_model_trains_exactly_on_parquet(tmp_path):
    """The one float input read from a Parquet file: two categorical columns (integers and
    strings, hashed below each id column's cardinality) first, then four numeric ones."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    rng = np.random.default_rng(0)
    n = 1200
    pq.write_table(pa.table({"user_id": rng.integers(0, 10**6, n),
                             "item": [f"i{k}" for k in rng.integers(0, 500, n)],
                             **{f"x{k}": rng.normal(size=n) for k in range(4)},
                             "clicked": rng.integers(0, 2, n).astype(float)}),
                   tmp_path / "clicks.parquet")
    trains_exactly_on_parquet(
        tmp_path, SCENARIO, {"features": ["user_id", "item", "x0", "x1", "x2", "x3"]})
