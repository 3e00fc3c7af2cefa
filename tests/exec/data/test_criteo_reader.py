"""The Criteo reader: its batches equal a pandas read of the same file, malformed lines are
counted exactly, and its memory stays bounded on a file far larger than its buffer."""

from __future__ import annotations

import numpy as np
import pytest

from heterps_exec.data.columns import ColumnMap, resolve
from heterps_exec.data.criteo import CAT_COLUMNS, COLUMNS, INT_COLUMNS, count_lines, parse_block
from heterps_exec.data.criteo_sample import write_criteo_sample
from heterps_exec.data.readers import row_stream
from heterps_exec.data.synthetic import raw_tensors
from heterps_sim.inputs.zoo import model_graph
from tests.exec.data.oracle import criteo_tensors, read_criteo_pandas

RAW = raw_tensors(model_graph("tiny-ctr"))  # 13 dense, 8 single-id tables of 1000 rows, label


def criteo_spec(path, *, train_rows, block_bytes=4 << 20, shuffle_rows=0, hash_seed=0,
                holdout_path="") -> dict:
    return {"format": "criteo", "path": str(path), "holdout_path": holdout_path,
            "train_rows": train_rows, "holdout_rows": 0, "block_bytes": block_bytes,
            "columns": resolve(RAW, {}, COLUMNS, numeric=INT_COLUMNS, categorical=CAT_COLUMNS),
            "hash_seed": hash_seed, "shuffle_rows": shuffle_rows, "dense_transform": "log1p"}


def all_rows(stream) -> dict:
    batches = list(stream.batches())
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    path = tmp_path_factory.mktemp("criteo") / "sample.tsv"
    bad = write_criteo_sample(path, rows=3000, seed=7, bad_rows=12)
    return path, bad


def test_batches_equal_a_pandas_read(sample):
    path, bad = sample
    want = criteo_tensors(read_criteo_pandas(path, bad), RAW)
    stream = row_stream(criteo_spec(path, train_rows=3000, block_bytes=20_000), RAW,
                        batch_size=100, seed=0, split="holdout")  # one pass, in file order
    stream.source.spec["train_rows"] = 0  # the "held-out" split = the whole file
    got = all_rows(stream)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].shape == want[name].shape, name
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6, err_msg=name)
    assert got["ids_0"].dtype == np.int64 and got["dense"].dtype == np.float32


def test_malformed_lines_are_counted_exactly(sample):
    path, bad = sample
    stream = row_stream(criteo_spec(path, train_rows=3000, block_bytes=8192), RAW,
                        batch_size=64, seed=0, split="holdout")
    stream.source.spec["train_rows"] = 0
    rows = sum(len(b["label"]) for b in stream.batches())
    s = stream.stats()
    assert s["bad_rows"] == len(bad) == 12 and rows == 3000 - 12 and s["rows_read"] == 3000
    assert [int(e.split(":")[0].split()[1]) for e in s["bad_examples"]] == bad[:5]


def test_each_kind_of_malformed_line_and_line_endings():
    good = "1\t5\t\t-3" + "\t0" * 10 + "\t0000000a" + "\t" * 25
    lines = [good, "", good.replace("1\t5", "2\t5", 1), good.replace("\t5\t", "\t5x\t", 1),
             good.replace("0000000a", "0000000g"), good.replace("\t-3\t", "\t-\t"),
             good + "\r", good.replace("0000000a", "1" * 17), good.split("\t", 1)[1], good]
    chunk = parse_block(("\n".join(lines)).encode())  # no final newline: the last line counts
    assert chunk.lines == 10 and chunk.bad == 7 and chunk.num_rows == 3
    assert [e.split(":", 1)[0] for e in chunk.examples] == [f"line {i}" for i in (2, 3, 4, 5, 6)]
    assert chunk.columns["I1"].tolist() == [5, 5, 5] and chunk.columns["I3"].tolist() == [-3] * 3
    assert chunk.columns["I2"].tolist() == [0, 0, 0]  # empty: missing, read as 0
    assert chunk.columns["C1"].tolist() == [10, 10, 10]  # "\r\n" ending handled
    assert chunk.columns["C2"].tolist() == [0, 0, 0]


def test_memory_stays_bounded_on_a_file_far_larger_than_the_buffer(tmp_path):
    path = tmp_path / "big.tsv"
    write_criteo_sample(path, rows=20_000, seed=1)
    block = 16_384  # ~65 lines of ~250 bytes per block, the file is ~5 MB
    stream = row_stream(criteo_spec(path, train_rows=20_000, block_bytes=block,
                                    shuffle_rows=500), RAW, batch_size=64, seed=0,
                        split="holdout")
    stream.source.spec["train_rows"] = 0
    assert sum(len(b["label"]) for b in stream.batches()) == 20_000
    lines_per_block = block // 40 + 1  # a Criteo line has at least 40 bytes (39 tabs + \n)
    bound = lines_per_block + 64 + 500
    peak = stream.stats()["peak_buffered_rows"]
    assert 500 <= peak <= bound < 20_000 // 10


def test_batches_do_not_depend_on_block_size_prefetch_or_restart(sample):
    path, bad = sample
    seen = []
    for block in (4096, 50_000, 4 << 20):
        s = row_stream(criteo_spec(path, train_rows=2500, block_bytes=block, shuffle_rows=300),
                       RAW, batch_size=128, seed=3)
        seen.append([s.batch(step) for step in range(40)])  # 40 x 128 > 2 x 2500: two epochs
    s = row_stream(criteo_spec(path, train_rows=2500, shuffle_rows=300), RAW, batch_size=128,
                   seed=3)
    s.prefetch(10, 40)
    seen.append(seen[0][:10] + [s.next_batch()[1] for _ in range(30)])
    again = [s.batch(step) for step in (3, 4)]  # backwards: the stream re-opens
    for other in seen[1:]:
        for a, b in zip(seen[0], other, strict=True):
            assert all(np.array_equal(a[k], b[k]) for k in a)
    assert all(np.array_equal(again[0][k], seen[0][3][k]) for k in again[0])
    good = 2500 - sum(1 for line in bad if line <= 2500)
    ids = np.concatenate([b["ids_0"] for b in seen[0]])[:, 0]
    one, two = ids[:good], ids[good:2 * good]
    assert sorted(one) == sorted(two) and not np.array_equal(one, two)  # reshuffled per epoch


def test_a_different_seed_or_hash_seed_changes_what_it_should():
    from heterps_exec.data.columns import hash_row
    v = np.arange(10_000, dtype=np.uint64)
    a, b = hash_row(v, 1000, 0), hash_row(v, 1000, 1)
    assert a.min() >= 0 and a.max() < 1000 and (a != b).mean() > 0.9
    # spread: no table row gets more than 3x its share of 10,000 consecutive values
    assert np.bincount(a, minlength=1000).max() <= 30


def test_count_lines_and_the_held_out_split(tmp_path):
    path = tmp_path / "s.tsv"
    write_criteo_sample(path, rows=1000, seed=2)
    assert count_lines(path) == 1000
    spec = criteo_spec(path, train_rows=900)
    held = row_stream(spec, RAW, batch_size=64, seed=0, split="holdout")
    assert [len(b["label"]) for b in held.batches()] == [64, 36]
    assert held.stats()["rows_read"] == 100
    df = read_criteo_pandas(path)
    want = criteo_tensors(df.iloc[900:], RAW)
    got = all_rows(row_stream(spec, RAW, batch_size=64, seed=0, split="holdout"))
    np.testing.assert_allclose(got["dense"], want["dense"], rtol=1e-6)
    assert np.array_equal(got["ids_3"], want["ids_3"])


def test_column_map_rejects_what_does_not_fit():
    from heterps_exec.data.columns import MappingError
    with pytest.raises(MappingError, match="unknown column 'C99'"):
        resolve(RAW, {"ids_0": "C99"}, COLUMNS, numeric=INT_COLUMNS, categorical=CAT_COLUMNS)
    with pytest.raises(MappingError, match="no raw tensor 'clicks'"):
        resolve(RAW, {"clicks": "label"}, COLUMNS)
    with pytest.raises(MappingError, match="width 13"):
        resolve(RAW, {"dense": ["I1", "I2"]}, COLUMNS, numeric=INT_COLUMNS,
                categorical=CAT_COLUMNS)
    m = resolve(RAW, {"ids_0": "C26"}, COLUMNS, numeric=INT_COLUMNS, categorical=CAT_COLUMNS)
    assert m["ids_0"] == ["C26"] and m["ids_1"] == ["C1"] and m["dense"] == list(INT_COLUMNS)
    out, good = ColumnMap(RAW, m)({**{c: np.array([1.0]) for c in INT_COLUMNS},
                                   **{c: np.array([5], np.uint64) for c in CAT_COLUMNS},
                                   "label": np.array([0.5])})
    assert not good[0]  # a label of 0.5 is malformed


def test_a_gzipped_file_reads_as_the_plain_one(sample, tmp_path):
    import gzip
    path, _ = sample
    packed = tmp_path / "day_0.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert count_lines(packed) == count_lines(path) == 3000
    plain, unpacked = _one_pass(path), _one_pass(packed)
    assert len(plain["label"]) == 3000 - 12
    assert all(np.array_equal(plain[k], v) for k, v in unpacked.items())


def _one_pass(path) -> dict:
    """Every good row of the file, in order (the held-out split of a file with no training
    lines is the whole file)."""
    stream = row_stream(criteo_spec(path, train_rows=0, block_bytes=30_000), RAW,
                        batch_size=500, seed=0, split="holdout")
    return all_rows(stream)
