"""Multi-hot bags (tests/fixtures/ctr_models/bags.py: nn.EmbeddingBag over ids and offsets) in
the engine: stages cut from the captured graph give the eager module's loss and gradients
(sum, mean and max bags), the data readers give each sample's padded ids and length (synthetic
data, Parquet list columns, a factory's arrays), and `heterps-exec run` ends with
single-process training's weights (1e-5), the bag on local tables or on the parameter
server, and the held-out log-loss computed here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from heterps_exec.data.columns import ColumnMap, hash_row, resolve
from heterps_exec.data.sources import FactoryMap, ParquetSource
from heterps_exec.data.synthetic import BatchStream, RawTensor, generate_dataset
from heterps_exec.model.user_model import data_graph, run_entry
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from tests.exec.helpers import run_three_steps_exactly
from tests.exec.model.test_messy_models import (
    assert_same_training,
    chained,
    direct_log_loss,
    plan_for,
)
from tests.exec.model.test_user_model_runs import trains_exactly_on_parquet

SCENARIO = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models" / "bags.yaml"
BAG = RawTensor("history", "ids", 4, "int64", 50, lengths="history_lengths")
LENGTHS = RawTensor("history_lengths", "lengths", 1, "int64", 4)
LABEL = RawTensor("label", "label", 1, "float32")


@pytest.mark.parametrize("mode, cuts", [("sum", [1, 3]), ("mean", [2]), ("max", [1])])
def test_stages_train_like_the_eager_module(tmp_path, mode, cuts):
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["model"]["kwargs"]["mode"] = mode
    path = tmp_path / "bags.yaml"
    path.write_text(yaml.safe_dump(doc))
    whole, stages = chained(path, cuts)
    assert_same_training(whole, stages)


def test_a_torchrec_style_bag_collection_trains_like_the_eager_module():
    """Two bag inputs, one nn.EmbeddingBag each in a ModuleDict (docs/guide/torchrec.md):
    cut between the two bags' layers and after them."""
    path = SCENARIO.with_name("bag_collection.yaml")
    assert load_input(path).problem.layer_names == (
        "dense_arch", "sparse.bags.clicks", "sparse.bags.tags", "over_arch.0", "over_arch.2",
        "loss")
    whole, stages = chained(path, [2, 3])
    assert_same_training(whole, stages)


def test_synthetic_data_pads_each_bag_and_draws_its_length(tmp_path):
    loaded = load_input(SCENARIO)
    plan = plan_from_dict(plan_for(list(loaded.problem.layer_names), []))
    graph = data_graph(run_entry(loaded.scenario.model, str(SCENARIO), plan))
    generate_dataset(graph, tmp_path / "data", num_samples=3000, seed=1, holdout_samples=300)
    for folder in (tmp_path / "data", tmp_path / "data" / "holdout"):
        ids, count = np.load(folder / "history.npy"), np.load(folder / "history_lengths.npy")
        assert ids.shape[1] == 6 and count.shape[1] == 1 and count.dtype == np.int64
        assert set(np.unique(count)) == set(range(1, 7))
        real = np.arange(6) < count
        assert (ids[~real] == 0).all() and ids.max() < 50 and len(np.unique(ids[real])) > 40
    assert 0.2 < np.load(tmp_path / "data" / "label.npy").mean() < 0.8
    BatchStream(tmp_path / "data", batch_size=64, graph=graph)


def test_a_parquet_list_column_is_read_as_padded_ids_and_lengths(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    rows = [[11, 12], [13], [], [1, 2, 3, 4, 5, 6], None]
    pq.write_table(pa.table({"history": pa.array(rows, pa.list_(pa.int64())),
                             "label": [1.0, 0.0, 1.0, 0.0, 1.0]}), tmp_path / "d.parquet")
    raw = [BAG, LENGTHS, LABEL]
    columns = resolve(raw, {}, ["history", "label"])
    assert columns == {"history": ["history"], "label": ["label"]}
    source = ParquetSource({"path": str(tmp_path / "d.parquet"), "columns": columns,
                            "categorical": [], "bags": {"history": 4}, "batch_rows": 100,
                            "train_rows": 5, "holdout_path": ""})
    (chunk,) = list(source.chunks("train"))
    out, good = ColumnMap(raw, columns)(chunk.columns)
    assert good.all()
    assert out["history_lengths"].ravel().tolist() == [2, 1, 0, 4, 0]  # cut at max_len 4
    want = [[11, 12, 0, 0], [13, 0, 0, 0], [0] * 4, [1, 2, 3, 4], [0] * 4]
    for row, values in zip(out["history"], want, strict=True):
        n = sum(v != 0 for v in values)
        assert row[:n].tolist() == hash_row(np.array(values[:n], np.uint64), 50).tolist()
        assert (row[n:] == 0).all()


def test_criteo_text_cannot_feed_a_bag():
    from heterps_exec.data.prepare import DataError, _criteo
    with pytest.raises(DataError, match=r"^s.yaml: data.format: the model's bag 'history' .* "
                                        r"Criteo text has none; use parquet"):
        _criteo(None, "s.yaml", [BAG, LENGTHS, LABEL], Path("."))


def test_a_factorys_bag_rows_are_checked_up_to_their_length():
    ids = np.array([[3, 99, 99, 99], [3, 4, 99, 0], [1, 2, 3, 4], [0, 0, 0, 0]])
    count = np.array([[1], [3], [4], [5]])
    out, good = FactoryMap([BAG, LENGTHS, LABEL])(
        {"history": ids, "history_lengths": count, "label": np.zeros((4, 1))})
    assert good.tolist() == [True, False, True, False]  # 99 inside row 1; length 5 > 4
    assert out["history"][0].tolist() == [3, 0, 0, 0]  # padding past the length: 0


RUNS = [([2], [1, 2], []), ([1], [1, 1], ["--ps-shards", "1"])]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("cuts,replicas,extra", RUNS, ids=["1-2", "ps"])
def test_bag_model_trains_exactly_and_scores_its_holdout(tmp_path, cuts, replicas, extra):
    plan = plan_for(list(load_input(SCENARIO).problem.layer_names), cuts, replicas)
    plan["num_microbatches"] = 4
    result = run_three_steps_exactly(tmp_path, SCENARIO, plan, *extra)
    holdout = result["extra"]["holdout"]
    assert holdout["rows"] > 0 and holdout["log_loss"] == pytest.approx(
        direct_log_loss(tmp_path / "run", tmp_path / "state.pt"), rel=1e-9)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_bag_model_trains_exactly_on_parquet_list_columns(tmp_path):
    """The bag read from a Parquet list<int> column (rows of 0..8 ids, cut at max_len 6),
    end to end: the run equals single-process training on the same rows."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    rng = np.random.default_rng(0)
    n = 1200
    history = [list(rng.integers(0, 10**6, rng.integers(0, 9))) for _ in range(n)]
    pq.write_table(pa.table({"user": rng.integers(0, 10**6, n),
                             "history": pa.array(history, pa.list_(pa.int64())),
                             **{f"d{k}": rng.normal(size=n) for k in range(3)},
                             "clicked": rng.integers(0, 2, n).astype(float)}),
                   tmp_path / "clicks.parquet")
    trains_exactly_on_parquet(tmp_path, SCENARIO, {"dense": ["d0", "d1", "d2"]})
