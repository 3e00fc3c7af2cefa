"""Parquet with a column mapping and a Python factory: batches equal a direct pandas read,
malformed rows are counted, and what cannot work is one line of bad input."""

from __future__ import annotations

import math
import sys
import textwrap

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from heterps_exec.data.columns import hash_row
from heterps_exec.data.prepare import DataError, prepare_data
from heterps_exec.data.readers import row_stream
from heterps_exec.data.synthetic import raw_tensors
from heterps_exec.runtime.layout import RunSpec
from heterps_sim.inputs.scenario import parse_scenario
from heterps_sim.inputs.zoo import model_graph
from tests.exec.data.oracle import splitmix_row

RAW = raw_tensors(model_graph("tiny-ctr"))
N = 1000


def frame(seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({f"f{j}": rng.normal(size=N) for j in range(13)})
    df.loc[rng.choice(N, 50, replace=False), "f3"] = np.nan  # missing -> 0
    for j in range(8):
        df[f"cat{j}"] = (rng.integers(0, 500, N) if j % 2 else
                         [f"tok{v}" for v in rng.integers(0, 300, N)])
    df["clicked"] = rng.integers(0, 2, N).astype(float)
    df.loc[[5, 17, 400], "clicked"] = [2.0, np.nan, 0.5]  # three malformed rows
    return df


MAPPING = {"dense": [f"f{j}" for j in range(13)], **{f"ids_{j}": f"cat{j}" for j in range(8)}}


def scenario(tmp_path, data: dict):
    text = {"name": "t", "model": {"name": "tiny-ctr"}, "workload": {
        "batch_size": 64, "throughput_limit": 1, "num_samples": 1e5}, "data": data}
    path = tmp_path / "s.yaml"
    path.write_text("x: 1\n")
    return parse_scenario(text, str(path)), str(path)


def spec_for(tmp_path, steps=5) -> RunSpec:
    return RunSpec(plan={}, model="tiny-ctr", data_dir=str(tmp_path / "d"), batch_size=64,
                   steps=steps, out_dir=str(tmp_path))


def test_parquet_batches_equal_a_pandas_read(tmp_path):
    df = frame()
    pq.write_table(pa.Table.from_pandas(df), tmp_path / "clicks.parquet", row_group_size=300)
    scn, path = scenario(tmp_path, {"format": "parquet", "path": "clicks.parquet",
                                    "label": "clicked", "columns": MAPPING,
                                    "holdout": {"rows": 100}, "batch_rows": 128})
    spec = prepare_data(spec_for(tmp_path), scn.data, path)
    assert spec.data["train_rows"] == 900 and spec.save_state
    stream = row_stream(spec.data, RAW, batch_size=64, seed=0)
    got = [stream.batch(s) for s in range(14)]  # 896 of the 897 good training rows
    assert stream.stats()["bad_rows"] == 3
    good = df.iloc[:900][df["clicked"].iloc[:900].isin([0.0, 1.0])].iloc[:896]
    dense = np.nan_to_num(good[[f"f{j}" for j in range(13)]].to_numpy()).astype(np.float32)
    assert np.array_equal(np.concatenate([b["dense"] for b in got]), dense)
    assert np.array_equal(np.concatenate([b["label"] for b in got])[:, 0], good["clicked"])
    ints = good["cat1"].to_numpy()
    assert np.concatenate([b["ids_1"] for b in got])[:, 0].tolist() == [
        splitmix_row(int(v), 1000) for v in ints]
    strings = pd.util.hash_array(good["cat0"].to_numpy(object))
    assert np.array_equal(np.concatenate([b["ids_0"] for b in got])[:, 0],
                          hash_row(strings, 1000))
    held = row_stream(spec.data, RAW, batch_size=64, seed=0, split="holdout")
    assert sum(len(b["label"]) for b in held.batches()) == 100


def test_parquet_bad_input_is_one_line(tmp_path):
    pq.write_table(pa.Table.from_pandas(frame()), tmp_path / "clicks.parquet")
    cases = [({"path": "nope.parquet"}, r"data.path: .*nope.parquet: no such file"),
             ({"columns": {**MAPPING, "ids_2": "cat99"}},
              r"data.columns.ids_2: unknown column 'cat99' \(file .*clicks.parquet\)"),
             ({"label": "click"}, r"no label column 'click'"),
             ({"max_bad_fraction": 0.001}, r"clicks.parquet: 3 of \d+ rows malformed")]
    for change, message in cases:
        data = {"format": "parquet", "path": "clicks.parquet", "label": "clicked",
                "columns": MAPPING, **change}
        scn, path = scenario(tmp_path, data)
        with pytest.raises(DataError, match=message) as info:
            prepare_data(spec_for(tmp_path, steps=20), scn.data, path)
        assert "\n" not in str(info.value)


FACTORY = '''
import numpy as np

def clicks(split="train", rows=640, bad=0, fail=False):
    if fail:
        raise RuntimeError("the warehouse is closed")
    rng = np.random.default_rng(0 if split == "train" else 1)
    for lo in range(0, rows, 100):
        n = min(100, rows - lo)
        chunk = {"dense": rng.normal(size=(n, 13)), "label": rng.integers(0, 2, n)}
        for j in range(8):
            chunk[f"ids_{j}"] = rng.integers(0, 1000, n)
        if lo == 0 and bad:
            chunk["ids_3"][:bad] = 1000  # outside the table: malformed
        yield chunk
'''


@pytest.fixture()
def factory_dir(tmp_path):
    (tmp_path / "my_clicks.py").write_text(textwrap.dedent(FACTORY))
    yield tmp_path
    sys.modules.pop("my_clicks", None)


def test_factory_batches_are_its_rows_and_bad_ones_are_counted(factory_dir):
    scn, path = scenario(factory_dir, {"format": "factory", "factory": "my_clicks:clicks",
                                       "kwargs": {"bad": 4}})
    spec = prepare_data(spec_for(factory_dir), scn.data, path)
    stream = row_stream(spec.data, RAW, batch_size=64, seed=0)
    got = [stream.batch(s) for s in range(9)]
    import my_clicks
    want = list(my_clicks.clicks(bad=4))
    dense = np.concatenate([c["dense"] for c in want])[4:4 + 9 * 64].astype(np.float32)
    assert np.array_equal(np.concatenate([b["dense"] for b in got]), dense)
    assert stream.stats()["bad_rows"] == 4
    assert stream.stats()["bad_examples"][0].startswith("row 1:")


def test_factory_bad_input_is_one_line(factory_dir):
    cases = [("nowhere.mod:fn", {}, r"data.factory: cannot load 'nowhere.mod:fn': "
                                    r"ModuleNotFoundError"),
             ("my_clicks:nothing", {}, r"cannot load 'my_clicks:nothing': AttributeError"),
             ("my_clicks:clicks", {"fail": True},
              r"data.factory: my_clicks:clicks \(train\) raised RuntimeError: the warehouse"),
             ("my_clicks:clicks", {"bad": 100}, r"my_clicks:clicks: 100 of \d+ rows malformed"),
             ("my_clicks:clicks", {"rows": "many"}, r"raised TypeError")]
    for factory, kwargs, message in cases:
        scn, path = scenario(factory_dir, {"format": "factory", "factory": factory,
                                           "kwargs": kwargs})
        with pytest.raises(DataError, match=message) as info:
            prepare_data(spec_for(factory_dir), scn.data, path)
        assert "\n" not in str(info.value)


def test_synthetic_holdout_is_extra_rows_of_the_same_distribution(tmp_path):
    scn, path = scenario(tmp_path, {"format": "synthetic", "num_samples": 4096,
                                    "holdout": {"fraction": 0.25}})
    spec = prepare_data(spec_for(tmp_path), scn.data, path)
    assert spec.data == {"format": "synthetic", "num_samples": 4096, "holdout_rows": 1024}
    held = np.load(tmp_path / "d" / "holdout" / "label.npy")
    train = np.load(tmp_path / "d" / "label.npy")
    assert len(held) == 1024 and len(train) == 4096
    assert abs(held.mean() - train.mean()) < 4 * math.sqrt(0.25 / 1024)


def test_data_folder_flag_is_only_for_synthetic_data(tmp_path):
    pq.write_table(pa.Table.from_pandas(frame()), tmp_path / "clicks.parquet")
    scn, path = scenario(tmp_path, {"format": "parquet", "path": "clicks.parquet",
                                    "label": "clicked", "columns": MAPPING})
    with pytest.raises(DataError, match="--data: the scenario's data section reads parquet"):
        prepare_data(spec_for(tmp_path), scn.data, path, data_dir=str(tmp_path))


def test_criteo_with_a_held_out_file_trains_on_all_of_the_main_one(tmp_path):
    from heterps_exec.data.criteo_sample import write_criteo_sample
    write_criteo_sample(tmp_path / "day_0.tsv", rows=700, seed=1)
    bad = write_criteo_sample(tmp_path / "day_23.tsv", rows=300, seed=2, bad_rows=2)
    scn, path = scenario(tmp_path, {"format": "criteo", "path": "day_0.tsv",
                                    "holdout": {"path": "day_23.tsv"}})
    spec = prepare_data(spec_for(tmp_path, steps=20), scn.data, path)
    assert spec.data["train_rows"] is None and spec.data["holdout_path"].endswith("day_23.tsv")
    train = row_stream(spec.data, RAW, batch_size=64, seed=0)
    train.endless = False
    assert sum(len(b["label"]) for b in train.batches()) == 700
    held = row_stream(spec.data, RAW, batch_size=64, seed=0, split="holdout")
    assert sum(len(b["label"]) for b in held.batches()) == 300 - len(bad)
    assert held.stats()["bad_rows"] == 2
