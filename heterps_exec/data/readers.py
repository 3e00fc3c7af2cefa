"""A run's batches from its resolved data spec: what the ranks, the reference and the scorer call.

    stream = open_stream(spec)              # training batches: .batch(step), .prefetch(...)
    for batch in holdout_batches(spec):     # the held-out rows, batch_size at a time
        ...

`spec` is the engine's RunSpec; `spec.data` is the dict prepare.py resolved from the
scenario's `data:` section ({} or format "synthetic": the .npy dataset in spec.data_dir).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from heterps_exec.data.columns import ColumnMap
from heterps_exec.data.sources import CriteoSource, FactoryMap, FactorySource, ParquetSource
from heterps_exec.data.stream import RowStream
from heterps_exec.data.synthetic import HOLDOUT, META, BatchStream, RawTensor, raw_tensors


def model_tensors(spec) -> list[RawTensor]:
    """The raw tensors the run's model reads (ids with their scaled table sizes)."""
    from heterps_exec.model.spec_graph import graph_for
    return raw_tensors(graph_for(spec))


def row_stream(data: dict, raw: list[RawTensor], *, batch_size: int, seed: int,
               split: str = "train") -> RowStream:
    """The stream of a criteo, parquet or factory spec."""
    fmt = data["format"]
    if fmt == "factory":
        source, mapper = FactorySource(data, raw), FactoryMap(raw)
    else:
        source = CriteoSource(data) if fmt == "criteo" else ParquetSource(data)
        mapper = ColumnMap(raw, data["columns"], hash_seed=data["hash_seed"],
                           dense_transform=data["dense_transform"])
    return RowStream(source, mapper, batch_size=batch_size, seed=seed,
                     shuffle_rows=data["shuffle_rows"], split=split)


def open_stream(spec):
    """Training batches of the run (BatchStream for synthetic data, else a RowStream)."""
    data = getattr(spec, "data", None) or {}
    if data.get("format", "synthetic") == "synthetic":
        return BatchStream(spec.data_dir, batch_size=spec.batch_size, seed=spec.seed)
    return row_stream(data, model_tensors(spec), batch_size=spec.batch_size, seed=spec.seed)


def has_holdout(spec) -> bool:
    data = getattr(spec, "data", None) or {}
    if data.get("format", "synthetic") == "synthetic":
        return (Path(spec.data_dir) / HOLDOUT / META).exists()
    return bool(data.get("holdout_rows") or data.get("holdout_path") or data.get("holdout"))


def holdout_batches(spec) -> Iterator[dict[str, np.ndarray]]:
    """The held-out rows in order, `spec.batch_size` at a time (the last batch shorter)."""
    data = getattr(spec, "data", None) or {}
    if data.get("format", "synthetic") == "synthetic":
        folder = Path(spec.data_dir) / HOLDOUT
        arrays = {p.stem: np.load(p, mmap_mode="r") for p in sorted(folder.glob("*.npy"))}
        n = len(next(iter(arrays.values())))
        for lo in range(0, n, spec.batch_size):
            yield {k: np.array(v[lo:lo + spec.batch_size]) for k, v in arrays.items()}
        return
    stream = row_stream(data, model_tensors(spec), batch_size=spec.batch_size, seed=spec.seed,
                        split="holdout")
    yield from stream.batches()
