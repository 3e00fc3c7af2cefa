"""Bags as TorchRec-style pipelines feed them (tests/fixtures/ctr_models/bags.py:WeightedBag):
nn.EmbeddingBag(include_last_offset=True) and per_sample_weights (mode "sum"). Stages cut
from the captured graph give the eager module's loss and gradients, synthetic data draws the
weights, Parquet reads them from a declared list<float> column, and `heterps-exec run` ends
with single-process training's weights (1e-5)."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from heterps_exec.data.columns import ColumnMap, resolve
from heterps_exec.data.sources import FactoryMap, ParquetSource
from heterps_exec.data.synthetic import BatchStream, RawTensor, generate_dataset, raw_tensors
from heterps_exec.model.user_model import data_graph, run_entry, whole_model
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.torch_model.bags import forward_args
from heterps_sim.inputs.torch_model.capture import raw_inputs
from heterps_sim.inputs.torch_model.section import TorchModelSection
from tests.exec.helpers import run_three_steps_exactly
from tests.exec.model.test_messy_models import (
    assert_same_training,
    batch_for,
    chained,
    plan_for,
)
from tests.exec.model.test_user_model_runs import trains_exactly_on_parquet

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models"
SCENARIO = FIXTURES / "weighted_bags.yaml"
BAG = RawTensor("history", "ids", 4, "int64", 50, lengths="history_lengths",
                weights="history_weights")
LENGTHS = RawTensor("history_lengths", "lengths", 1, "int64", 4)
WEIGHTS = RawTensor("history_weights", "weights", 4, "float32", range=(0.5, 1.5),
                    lengths="history_lengths")
LABEL = RawTensor("label", "label", 1, "float32")


def variant(tmp_path: Path, module: str = "WeightedBag", kwargs: dict | None = None,
            **bag) -> Path:
    """weighted_bags.yaml with another module (its kwargs added) and bag declaration."""
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["model"]["module"] = f"tests.fixtures.ctr_models.bags:{module}"
    doc["model"]["kwargs"].update(kwargs or {})
    doc["model"]["inputs"][1].update(bag)
    path = tmp_path / "bags.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_forward_gets_offsets_with_their_end_and_each_ids_weight():
    doc = yaml.safe_load(SCENARIO.read_text())["model"]
    inputs = raw_inputs(TorchModelSection.model_validate(doc))
    assert [(r.name, r.shape) for r in inputs] == [
        ("user", ()), ("history", (6,)), ("history_lengths", ()), ("history_weights", (6,)),
        ("dense", (3,))]
    padded = torch.tensor([[5, 6, 0, 0, 0, 0], [7, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6]])
    weights = torch.arange(18, dtype=torch.float32).reshape(3, 6)
    user, dense = torch.tensor([0, 1, 2]), torch.zeros(3, 3)
    args = forward_args(inputs, [user, padded, torch.tensor([2, 1, 6]), weights, dense])
    assert [a.tolist() for a in args[1:4]] == [[5, 6, 7, 1, 2, 3, 4, 5, 6], [0, 2, 3, 9],
                                               [0, 1, 6, 12, 13, 14, 15, 16, 17]]
    assert args[0] is user and args[4] is dense and len(args) == 5


def test_the_weighted_bag_is_a_table_the_planner_sees():
    """The weights ride with the pooling, not the table: the bag stays an embedding table
    (so it may live on the parameter server), looked up mean_length times per sample."""
    from heterps_sim.inputs.torch_model import section_model_spec
    doc = yaml.safe_load(SCENARIO.read_text())["model"]
    spec = section_model_spec(TorchModelSection.model_validate(doc), source="s.yaml")
    bag = spec.layers[0]
    assert (bag.name, bag.kind, bag.table_rows, bag.table_dim, bag.lookups_per_sample) == (
        "history", "embedding", 50, 4, 4)  # 3.5 ids per sample, rounded up
    assert bag.param_bytes == 0  # the table is not dense


@pytest.mark.parametrize("module, last, weights, cuts", [
    ("WeightedBag", True, True, [1, 3]), ("WeightedBag", False, True, [2]),
    ("HistoryBag", True, False, [1])], ids=["both", "weights-only", "last-offset-only"])
def test_stages_train_like_the_eager_module(tmp_path, module, last, weights, cuts):
    path = variant(tmp_path, module, {"include_last_offset": last}, include_last_offset=last,
                   per_sample_weights=weights)
    assert load_input(path).problem.layer_names[0] == "history"
    whole, stages = chained(path, cuts)
    assert_same_training(whole, stages)


def test_the_weights_change_the_loss(tmp_path):
    """The weights reach the bag: the same ids with other weights give another output."""
    loaded = load_input(SCENARIO)
    plan = plan_from_dict(plan_for(list(loaded.problem.layer_names), []))
    whole = whole_model(types.SimpleNamespace(
        user_model=run_entry(loaded.scenario.model, str(SCENARIO), plan), seed=3))
    env = batch_for(whole.cap, 8)
    a = whole(env)[0]["output"]
    b = whole({**env, "history_weights": env["history_weights"] * 2})[0]["output"]
    assert not torch.allclose(a, b)


def test_a_mismatched_last_offset_is_one_line(tmp_path, capsys):
    from heterps_sim.cli import main
    path = variant(tmp_path, include_last_offset=False)
    assert main(["problem", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "model.inputs" in err and "include_last_offset=True" in err and \
        "declare include_last_offset: true on input 'history'" in err, err


def test_weights_on_a_bag_that_is_not_a_sum_are_refused_in_one_line(tmp_path, capsys):
    from heterps_sim.cli import main
    path = variant(tmp_path, kwargs={"mode": "mean"})
    assert main(["problem", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "model.module: WeightedBag: history is nn.EmbeddingBag(mode='mean') and is given " \
        "per_sample_weights, which torch pools only with mode='sum'" in err, err


def test_synthetic_data_draws_positive_weights_beside_the_ids(tmp_path):
    loaded = load_input(SCENARIO)
    plan = plan_from_dict(plan_for(list(loaded.problem.layer_names), []))
    graph = data_graph(run_entry(loaded.scenario.model, str(SCENARIO), plan))
    assert [(t.name, t.role) for t in raw_tensors(graph)][1:4] == [
        ("history", "ids"), ("history_lengths", "lengths"), ("history_weights", "weights")]
    generate_dataset(graph, tmp_path / "a", num_samples=2000, seed=1, holdout_samples=100)
    generate_dataset(graph, tmp_path / "b", num_samples=2000, seed=1)
    for folder in (tmp_path / "a", tmp_path / "a" / "holdout"):
        w, count = np.load(folder / "history_weights.npy"), np.load(folder / "history_lengths.npy")
        real = np.arange(6) < count
        assert w.dtype == np.float32 and w.shape[1] == 6
        assert (w[~real] == 0).all() and w[real].min() >= 0.5 and w[real].max() < 1.5
    assert np.array_equal(np.load(tmp_path / "a" / "history_weights.npy"),
                          np.load(tmp_path / "b" / "history_weights.npy"))  # seeded
    BatchStream(tmp_path / "a", batch_size=64, graph=graph)


def test_a_parquet_list_of_floats_is_read_as_padded_weights(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    ids = [[11, 12], [13], [1, 2, 3, 4, 5, 6], [7, 8], [9]]
    w = [[0.5, 2.0], [1.0], [1, 2, 3, 4, 5, 6], [1.0], [float("inf")]]
    pq.write_table(pa.table({"history": pa.array(ids, pa.list_(pa.int64())),
                             "seconds": pa.array(w, pa.list_(pa.float64())),
                             "label": [1.0, 0.0, 1.0, 0.0, 1.0]}), tmp_path / "d.parquet")
    raw = [BAG, LENGTHS, WEIGHTS, LABEL]
    columns = resolve(raw, {"history_weights": "seconds"}, ["history", "seconds", "label"])
    assert columns == {"history": ["history"], "history_weights": ["seconds"],
                       "label": ["label"]}
    source = ParquetSource({"path": str(tmp_path / "d.parquet"), "columns": columns,
                            "categorical": [], "bags": {"history": 4, "seconds": 4},
                            "float_lists": ["seconds"], "batch_rows": 100, "train_rows": 5,
                            "holdout_path": ""})
    (chunk,) = list(source.chunks("train"))
    out, good = ColumnMap(raw, columns)(chunk.columns)
    # row 3: two ids and one weight; row 4: an infinite weight
    assert good.tolist() == [True, True, True, False, False]
    assert out["history_weights"][:3].tolist() == [[0.5, 2.0, 0, 0], [1.0, 0, 0, 0],
                                                   [1, 2, 3, 4]]  # cut at max_len 4
    assert out["history_weights"].dtype == np.float32


def test_a_weighted_bag_without_its_weights_column_is_one_line():
    from heterps_exec.data.columns import MappingError
    with pytest.raises(MappingError, match=r"^columns.history_weights: the model's bag "
                                           r"weights 'history_weights' read one list column"):
        resolve([BAG, LENGTHS, WEIGHTS, LABEL], {}, ["history", "label"])


def test_a_factorys_weights_are_checked_up_to_their_length():
    ids = np.array([[3, 4, 0, 0], [1, 2, 3, 4], [5, 0, 0, 0]])
    count = np.array([[2], [4], [1]])
    w = np.array([[0.5, 1.0, np.nan, 9.0], [1, 2, np.inf, 1], [2.0, 0, 0, 0]])
    out, good = FactoryMap([BAG, LENGTHS, WEIGHTS, LABEL])(
        {"history": ids, "history_lengths": count, "history_weights": w,
         "label": np.zeros((3, 1))})
    assert good.tolist() == [True, False, True]  # an infinite weight inside row 1
    assert out["history_weights"][0].tolist() == [0.5, 1.0, 0, 0]  # padding past the length


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("cuts,replicas,extra", [([2], [1, 2], []),
                                                 ([1], [1, 1], ["--ps-shards", "1"])],
                         ids=["1-2", "ps"])
def test_weighted_bag_trains_exactly(tmp_path, cuts, replicas, extra):
    """Synthetic data, two stages (the second replicated; or the bag's table on the parameter
    server), 4 microbatches: the run ends with single-process training's weights."""
    plan = plan_for(list(load_input(SCENARIO).problem.layer_names), cuts, replicas)
    plan["num_microbatches"] = 4
    run_three_steps_exactly(tmp_path, SCENARIO, plan, *extra)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_weighted_bag_trains_exactly_on_parquet(tmp_path):
    """The ids from a list<int> column, their weights from a declared list<float> column."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    rng = np.random.default_rng(0)
    n = 1200
    lengths = rng.integers(1, 9, n)
    history = [list(rng.integers(0, 10**6, k)) for k in lengths]
    seconds = [list(rng.uniform(0.1, 3.0, k)) for k in lengths]
    pq.write_table(pa.table({"user": rng.integers(0, 10**6, n),
                             "history": pa.array(history, pa.list_(pa.int64())),
                             "seconds": pa.array(seconds, pa.list_(pa.float64())),
                             **{f"d{k}": rng.normal(size=n) for k in range(3)},
                             "clicked": rng.integers(0, 2, n).astype(float)}),
                   tmp_path / "clicks.parquet")
    trains_exactly_on_parquet(tmp_path, SCENARIO, {"dense": ["d0", "d1", "d2"],
                                                   "history_weights": "seconds"})
