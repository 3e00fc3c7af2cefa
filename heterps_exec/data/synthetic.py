"""Synthetic CTR training data on disk, and a prefetching loader of global batches.

    generate_dataset(graph, "data/", num_samples=100_000, seed=0)   # one .npy per raw tensor
    stream = BatchStream("data/", batch_size=256, seed=0)
    batch = stream.batch(step)          # {raw tensor name: [256, width] array}, same for all

Criteo-like, per the model's raw tensors (heterps_sim.inputs.graph.ModelGraph.raw):
- ids (read by an embedding layer): int64 [N, ids per sample], Zipf(a)-distributed over the
  table's rows (a = 1.05 by default: Criteo's id frequencies are close to that), hot ids
  scattered by a fixed permutation so that row 0 is not always the hottest;
- dense features: float32 standard normal (Criteo's 13 counts after the usual log/standardise),
  or uniform in [low, high) where the model declares a range (a user model's float input
  that holds ids: `model.inputs[].range`, read from an "input" node's attrs); a float tensor
  whose first columns hold ids (`model.inputs[].id_columns`) gets Zipf ids there, as whole
  numbers in float32, each column below its own cardinality;
- a bag (a multi-hot input: `model.inputs[].bag`): ids padded to max_len (0 past a sample's
  length), its lengths tensor uniform in 1..max_len; the hidden weights of a sample's own
  ids only enter its label; a weighted bag's per-id weights (`per_sample_weights`) uniform
  in the declared range (0 past the length), the label's hidden weights scaled by them;
- label: Bernoulli(sigmoid(w . dense + sum of hidden per-id weights + b)), so a model that
  learns the ids and features really lowers the loss; int64 class for softmax heads.
The zoo's cardinalities are used as given; scale them with models.scale_tables first.

Batch order: step n reads positions [nB, (n+1)B) of an endless sequence of epochs, epoch e a
permutation drawn from (seed, e). Every pipeline layout asks for the same step's global batch
and so trains on the same samples in the same order.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from heterps_sim.core.outputs import fsync_dir, write_json, write_via
from heterps_sim.inputs.graph import F32, ID_BYTES, ModelGraph

META = "meta.json"
HOLDOUT = "holdout"
"""Sub-folder of the held-out samples (same layout as the training folder)."""
HIDDEN_ID_WEIGHT = 0.5
"""Std of the hidden per-id logit contributions (with 13 dense weights of std 0.3: labels
that are learnable but far from separable, like click logs)."""


@dataclass(frozen=True, slots=True)
class RawTensor:
    name: str
    role: str
    """"ids", "label", "features", a bag's "lengths", or a weighted bag's "weights"."""
    width: int
    dtype: str
    rows: int = 0
    """Ids: the table size the ids index (0 otherwise)."""
    range: tuple[float, float] | None = None
    """Features: drawn uniformly from [low, high) (None: standard normal)."""
    id_columns: tuple[int, ...] = ()
    """Features: the first columns hold ids (as floats), column k below id_columns[k]."""
    lengths: str = ""
    """Ids (or per-id weights) of a bag: the tensor holding each sample's number of ids (the
    rest is padding)."""
    weights: str = ""
    """Ids of a weighted bag: the tensor holding their weights (padded likewise)."""


def raw_tensors(graph: ModelGraph) -> list[RawTensor]:
    """What the model reads from storage, with each tensor's role, width and dtype."""
    rows: dict[str, int] = {}
    labels: dict[str, str] = {}
    ranges: dict[str, tuple[float, float]] = {}
    id_columns: dict[str, tuple[int, ...]] = {}
    bags: dict[str, str] = {}
    lengths: dict[str, int] = {}
    weighted: dict[str, str] = {}
    for n in graph.nodes:
        if n.op == "input":
            if n.attrs.get("weights_of"):  # weights -> its bag's lengths tensor
                weighted[n.consumes[0]] = n.attrs["weights_of"]
            if n.attrs.get("range") is not None:
                ranges[n.consumes[0]] = tuple(float(v) for v in n.attrs["range"])
            if n.attrs.get("id_columns"):
                id_columns[n.consumes[0]] = tuple(int(c) for c in n.attrs["id_columns"])
            if n.attrs.get("lengths_of"):
                bags[n.attrs["lengths_of"]] = n.consumes[0]
                lengths[n.consumes[0]] = int(n.attrs["max_len"])
        elif n.op == "embedding":
            tables = n.attrs["tables"]
            for j, t in enumerate(n.consumes):
                r = tables[0] if len(tables) == 1 else tables[j]
                rows[t] = min(rows.get(t, r), r)
        elif n.op == "loss" and len(n.consumes) > 1:
            labels[n.consumes[-1]] = n.attrs["loss"]
        elif n.op == "linear" and n.attrs.get("loss"):
            labels[n.consumes[-1]] = "bce"
    out = []
    weights_of = {bag: w for w, ln in weighted.items() for bag, bl in bags.items() if bl == ln}
    for name, nbytes in graph.raw:
        if name in rows:
            out.append(RawTensor(name, "ids", int(nbytes // ID_BYTES), "int64", rows[name],
                                 lengths=bags.get(name, ""), weights=weights_of.get(name, "")))
        elif name in lengths:  # "rows": the bag's max_len (lengths lie in 1..max_len)
            out.append(RawTensor(name, "lengths", 1, "int64", lengths[name]))
        elif name in weighted:
            out.append(RawTensor(name, "weights", int(nbytes // F32), "float32",
                                 range=ranges.get(name), lengths=weighted[name]))
        elif name in labels:
            dtype = "int64" if labels[name] == "softmax_ce" else "float32"
            out.append(RawTensor(name, "label", 1, dtype))
        else:
            out.append(RawTensor(name, "features", int(nbytes // F32), "float32",
                                 range=ranges.get(name), id_columns=id_columns.get(name, ())))
    return out


def zipf_ids(rng: np.random.Generator, rows: int, shape: tuple[int, ...], a: float) -> np.ndarray:
    """Ids in [0, rows) with P(rank k) ~ k^-a, ranks mapped to ids by a fixed permutation."""
    weights = np.arange(1, rows + 1, dtype=np.float64) ** -a
    cdf = np.cumsum(weights)
    ranks = np.searchsorted(cdf, rng.random(shape) * cdf[-1], side="right")
    return rng.permutation(rows)[np.minimum(ranks, rows - 1)].astype(np.int64)


def generate_dataset(graph: ModelGraph, path: str | Path, *, num_samples: int, seed: int = 0,
                     zipf_a: float = 1.05, holdout_samples: int = 0) -> Path:
    """Write the dataset (one .npy per raw tensor + meta.json, written last) and return path.

    `holdout_samples` more samples of the same distribution (same hidden weights) go to
    path/holdout/, drawn after the training ones: the training samples do not depend on it.
    Every file is written whole or not at all (core.outputs), and an earlier dataset's
    meta.json is removed before the first array: a folder interrupted half way is never read
    as a dataset (BatchStream refuses it) until a later call completes it."""
    if num_samples < 1:
        raise ValueError("num_samples must be >= 1")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for folder in (path, path / HOLDOUT):
        _unmark(folder)
    rng = np.random.default_rng([seed, 0xDA7A])
    spec = raw_tensors(graph)
    ranges = {t.name: t.range for t in spec}
    arrays, logit, weights = {}, np.zeros(num_samples), {}
    for t in spec:
        if t.role == "ids":
            ids = zipf_ids(rng, t.rows, (num_samples, t.width), zipf_a)
            weights[t.name] = rng.normal(0.0, HIDDEN_ID_WEIGHT, t.rows)
            logit += ids_logit(rng, t, ids, weights, arrays, ranges)
            arrays[t.name] = ids
        elif t.role == "features":
            x = features(rng, t, num_samples, zipf_a)
            weights[t.name] = rng.normal(0.0, 0.3, t.width)
            for k, rows in enumerate(t.id_columns):
                weights[t.name, k] = rng.normal(0.0, HIDDEN_ID_WEIGHT, rows)
            logit += feature_logit(t, x, weights)
            arrays[t.name] = x
    centre = logit.mean()
    labels = _labels(rng, logit - centre)
    _save(path, spec, arrays, labels)
    if holdout_samples > 0:
        held, held_logit = {}, np.zeros(holdout_samples)
        for t in spec:  # same hidden weights and centre: the function the model learns
            if t.role == "ids":
                held[t.name] = zipf_ids(rng, t.rows, (holdout_samples, t.width), zipf_a)
                held_logit += ids_logit(rng, t, held[t.name], weights, held, ranges)
            elif t.role == "features":
                held[t.name] = features(rng, t, holdout_samples, zipf_a)
                held_logit += feature_logit(t, held[t.name], weights)
        (path / HOLDOUT).mkdir(exist_ok=True)
        _save(path / HOLDOUT, spec, held, _labels(rng, held_logit - centre))
        _write_meta(path / HOLDOUT, graph, holdout_samples, seed, zipf_a, spec)
    _write_meta(path, graph, num_samples, seed, zipf_a, spec, labels)
    return path


def ids_logit(rng: np.random.Generator, t: RawTensor, ids: np.ndarray, weights: dict,
              arrays: dict, weight_range: dict | None = None) -> np.ndarray:
    """An ids tensor's part of the label's logit: its ids' hidden weights over sqrt(count).
    A bag's lengths (and a weighted bag's weights, inside weight_range[name]: they scale the
    hidden weights) are drawn here into arrays, its padding set to 0 and left out."""
    if not t.lengths:
        return weights[t.name][ids].sum(1) / np.sqrt(t.width)
    n, top = ids.shape
    count = rng.integers(1, top + 1, n)
    arrays[t.lengths] = count.reshape(-1, 1).astype(np.int64)
    real = np.arange(top) < count[:, None]
    ids[~real] = 0
    scale = real.astype(np.float64)
    if t.weights:  # each id's weight, inside its declared range (padding: 0)
        low, high = weight_range[t.weights]
        w = rng.uniform(low, high, (n, top)).astype(np.float32) * real
        arrays[t.weights] = w.astype(np.float32)
        scale = scale * w
    return (weights[t.name][ids] * scale).sum(1) / np.sqrt(count)


def features(rng: np.random.Generator, t: RawTensor, n: int, zipf_a: float = 1.05) -> np.ndarray:
    """n rows of a float tensor: standard normal, or uniform in its [low, high) (below high
    even after rounding to float32, so a column of ids cast to int stays inside its table);
    its id columns, if any, hold Zipf ids as whole numbers."""
    if t.range is None:
        x = rng.standard_normal((n, t.width)).astype(np.float32)
    else:
        low, high = t.range
        x = rng.uniform(low, high, (n, t.width)).astype(np.float32)
        x = np.minimum(x, np.nextafter(np.float32(high), np.float32(-np.inf)))
    for k, rows in enumerate(t.id_columns):
        x[:, k] = zipf_ids(rng, rows, (n,), zipf_a)
    return x


def feature_logit(t: RawTensor, x: np.ndarray, weights: dict) -> np.ndarray:
    """A float tensor's part of the label's logit: its dense columns standardised times their
    weights, plus each id column's hidden per-id weight (as an ids tensor's, over sqrt(k))."""
    k = len(t.id_columns)
    out = standardised(t, x[:, k:]) @ weights[t.name][k:]
    for j in range(k):
        out += weights[t.name, j][x[:, j].astype(np.int64)] / np.sqrt(k)
    return out


def standardised(t: RawTensor, x: np.ndarray) -> np.ndarray:
    """x at mean 0 and std 1 (a uniform's (x - mid) / ((high - low) / sqrt 12)), so a ranged
    feature weighs in the label's logit as a standard normal one does."""
    if t.range is None:
        return x
    low, high = t.range
    return (x - (low + high) / 2) / ((high - low) / np.sqrt(12.0))


def _labels(rng: np.random.Generator, logit: np.ndarray) -> np.ndarray:
    return (rng.random(len(logit)) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)


def _save(path: Path, spec: list[RawTensor], arrays: dict, labels: np.ndarray) -> None:
    for t in spec:
        if t.role == "label":
            arrays[t.name] = labels.reshape(-1, 1).astype(t.dtype)
    for name, arr in arrays.items():
        write_via(path / f"{name}.npy", lambda tmp, arr=arr: np.save(tmp, arr))


def _unmark(folder: Path) -> None:
    """Remove folder's meta.json (durably): until a new one is written it holds no dataset."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        (folder / META).unlink()
        fsync_dir(folder)


def _write_meta(path: Path, graph: ModelGraph, num_samples: int, seed: int, zipf_a: float,
                spec: list[RawTensor], labels: np.ndarray | None = None) -> None:
    meta = {"model": graph.name, "num_samples": num_samples, "seed": seed, "zipf_a": zipf_a,
            "tensors": [asdict(t) for t in spec]}
    if labels is not None:
        meta["positive_rate"] = float(labels.mean())
    write_json(path / META, meta)  # last: the folder is a dataset from here on


class DatasetError(ValueError):
    """The dataset folder is missing, incomplete or made for another model."""


class BatchStream:
    """Global batches by step number, read from memory-mapped .npy files; `prefetch(start)`
    loads the following steps on a background thread while the caller trains."""

    def __init__(self, path: str | Path, *, batch_size: int, seed: int = 0,
                 graph: ModelGraph | None = None) -> None:
        self.path = Path(path)
        try:
            self.meta = json.loads((self.path / META).read_text())
        except (OSError, ValueError):
            raise DatasetError(f"{self.path}: no dataset here (missing or bad {META})") from None
        self.tensors = [RawTensor(**{**t, "range": tuple(t["range"]) if t.get("range") else None,
                                     "id_columns": tuple(t.get("id_columns", ()))})
                        for t in self.meta["tensors"]]
        if graph is not None:
            want = {(t.name, t.role, t.width, t.range, t.id_columns) for t in raw_tensors(graph)}
            if want != {(t.name, t.role, t.width, t.range, t.id_columns) for t in self.tensors}:
                raise DatasetError(f"{self.path}: dataset was made for model "
                                   f"{self.meta['model']!r}, not {graph.name!r}")
        self.num_samples = int(self.meta["num_samples"])
        self.arrays = {t.name: self._array(t) for t in self.tensors}
        self.batch_size, self.seed = batch_size, seed
        self._perms: dict[int, np.ndarray] = {}
        self._queue: queue.Queue | None = None
        self.rows_served = 0

    def _array(self, t: RawTensor) -> np.ndarray:
        """One tensor's memory-mapped array, checked against meta.json (a file of another
        generation, or cut short, is refused)."""
        file = self.path / f"{t.name}.npy"
        try:
            arr = np.load(file, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{file}: incomplete dataset ({exc})") from None
        if arr.shape != (self.num_samples, t.width):
            raise DatasetError(f"{file}: shape {arr.shape}, but {META} says "
                               f"({self.num_samples}, {t.width}): not this dataset's array")
        return arr

    def _positions(self, step: int) -> np.ndarray:
        first = step * self.batch_size
        pos = np.arange(first, first + self.batch_size)
        epochs, within = np.divmod(pos, self.num_samples)
        out = np.empty_like(pos)
        for e in np.unique(epochs):
            if e not in self._perms:
                self._perms = {e: np.random.default_rng([self.seed, int(e)]).permutation(
                    self.num_samples)}
            sel = epochs == e
            out[sel] = self._perms[e][within[sel]]
        return out

    def batch(self, step: int) -> dict[str, np.ndarray]:
        """Step `step`'s global batch: {raw tensor name: [batch_size, width] array}."""
        self.rows_served += self.batch_size
        pos = self._positions(step)
        idx = np.sort(pos)  # read the memmap in file order, then put rows back in batch order
        order = np.argsort(np.argsort(pos))
        return {name: np.ascontiguousarray(arr[idx][order]) for name, arr in self.arrays.items()}

    def prefetch(self, start: int, stop: int, depth: int = 2) -> None:
        """Start loading steps start..stop-1 in the background (next_batch() takes them)."""
        self._queue = queue.Queue(maxsize=depth)
        threading.Thread(target=self._fill, args=(start, stop), daemon=True).start()

    def _fill(self, start: int, stop: int) -> None:
        for step in range(start, stop):
            self._queue.put((step, self.batch(step)))

    def next_batch(self) -> tuple[int, dict[str, np.ndarray]]:
        if self._queue is None:
            raise RuntimeError("call prefetch(start, stop) first")
        return self._queue.get()

    def stats(self) -> dict:
        """Rows served so far (a generated dataset has no malformed rows)."""
        return {"rows_read": self.rows_served, "bad_rows": 0}
