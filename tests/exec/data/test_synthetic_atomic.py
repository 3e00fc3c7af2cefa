"""The synthetic dataset is written whole or not at all: each array and meta.json atomically
(core.outputs), meta.json last and an earlier one removed first, so a generation interrupted
at any file never leaves a folder BatchStream reads as a dataset; arrays that do not match
meta.json are refused."""

from __future__ import annotations

import numpy as np
import pytest

from heterps_exec.data import synthetic
from heterps_exec.data.synthetic import (
    HOLDOUT,
    META,
    BatchStream,
    DatasetError,
    generate_dataset,
    raw_tensors,
)
from heterps_sim.inputs.zoo import model_graph

GRAPH = model_graph("tiny-ctr")


class Interrupted(BaseException):
    """Stands for Ctrl-C (a BaseException, as KeyboardInterrupt)."""


def _interrupt_after(monkeypatch, arrays_written: int) -> list[str]:
    """np.save raises once `arrays_written` arrays are whole; returns the names written."""
    real, written = np.save, []

    def save(file, arr, *args, **kwargs):
        if len(written) >= arrays_written:
            with open(file, "wb") as fh:  # half a file, as a killed process leaves it
                fh.write(b"\x93NUMPY half")
            raise Interrupted
        real(file, arr, *args, **kwargs)
        written.append(str(file))

    monkeypatch.setattr(synthetic.np, "save", save)
    return written


def _no_temporaries(folder) -> None:
    assert [p.name for p in folder.rglob("*") if ".tmp" in p.name] == []


def _files_per_dataset() -> int:
    return len(raw_tensors(GRAPH))


@pytest.mark.parametrize("holdout", [0, 32])
def test_every_interruption_point_leaves_no_dataset(tmp_path, monkeypatch, holdout):
    arrays = _files_per_dataset() * (2 if holdout else 1)
    for stop in range(arrays):
        folder = tmp_path / f"fresh-{stop}"
        _interrupt_after(monkeypatch, stop)
        with pytest.raises(Interrupted):
            generate_dataset(GRAPH, folder, num_samples=64, seed=3, holdout_samples=holdout)
        monkeypatch.undo()
        assert not (folder / META).exists()
        _no_temporaries(folder)
        with pytest.raises(DatasetError, match="no dataset here"):
            BatchStream(folder, batch_size=8, graph=GRAPH)
        # a whole later generation into the same folder is a dataset again
        generate_dataset(GRAPH, folder, num_samples=64, seed=3, holdout_samples=holdout)
        assert BatchStream(folder, batch_size=8, graph=GRAPH).num_samples == 64


def test_an_interrupted_regeneration_does_not_leave_the_old_meta(tmp_path, monkeypatch):
    generate_dataset(GRAPH, tmp_path, num_samples=64, seed=1, holdout_samples=16)
    old = BatchStream(tmp_path, batch_size=8, graph=GRAPH).batch(0)
    _interrupt_after(monkeypatch, 2)  # two of the new arrays written, with the old others
    with pytest.raises(Interrupted):
        generate_dataset(GRAPH, tmp_path, num_samples=128, seed=2)
    monkeypatch.undo()
    for folder in (tmp_path, tmp_path / HOLDOUT):
        assert not (folder / META).exists()
        with pytest.raises(DatasetError):
            BatchStream(folder, batch_size=8)
    _no_temporaries(tmp_path)
    generate_dataset(GRAPH, tmp_path, num_samples=64, seed=1, holdout_samples=16)
    again = BatchStream(tmp_path, batch_size=8, graph=GRAPH).batch(0)
    assert all(np.array_equal(old[k], again[k]) for k in old)


def test_arrays_that_do_not_match_meta_are_refused(tmp_path):
    generate_dataset(GRAPH, tmp_path, num_samples=64, seed=1)
    name = raw_tensors(GRAPH)[0].name
    arr = np.load(tmp_path / f"{name}.npy")
    np.save(tmp_path / f"{name}.npy", arr[:10])  # another generation's, or cut short
    with pytest.raises(DatasetError, match=rf"{name}\.npy: shape \(10, "):
        BatchStream(tmp_path, batch_size=8, graph=GRAPH)
    (tmp_path / f"{name}.npy").write_bytes(b"\x93NUMPY half")
    with pytest.raises(DatasetError, match="incomplete dataset"):
        BatchStream(tmp_path, batch_size=8, graph=GRAPH)
