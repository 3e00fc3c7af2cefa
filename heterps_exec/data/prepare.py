"""The scenario's `data:` section -> the run spec's resolved data, checked before any rank starts.

    spec = prepare_data(spec, scenario_section, scenario_path, data_dir="", num_samples=0)

Everything wrong with the data is one line of bad input (DataError, exit 2) here, never a
failure mid-run: a missing or unreadable file, an unknown column, a mapping that does not fit
the model's tensors, a factory that cannot be imported or raises, and more malformed rows
than `max_bad_fraction` among the rows the run will read. To know that, the rows the run
will read are read once here with the run's own reader (`steps` global batches, at most one
epoch, plus the held-out rows): the same count the run reports. A held-out slice makes the
ranks hand their weights back (`save_state`), so the launcher can score it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from heterps_exec.data.columns import MappingError, resolve
from heterps_exec.data.criteo import CAT_COLUMNS, COLUMNS, INT_COLUMNS, count_lines
from heterps_exec.data.readers import row_stream
from heterps_exec.data.sources import load_factory
from heterps_exec.data.stream import DataStreamError
from heterps_exec.data.synthetic import BatchStream, DatasetError, generate_dataset, raw_tensors
from heterps_sim.core.files import UserFileError


class DataError(UserFileError):
    """Bad training data or data section: one line naming the file, the field, the problem."""


def prepare_data(spec, section, scenario: str, *, data_dir: str = "", num_samples: int = 0):
    """The run spec with `data` resolved (and the synthetic dataset written if needed)."""
    from heterps_exec.model.spec_graph import graph_for
    graph = graph_for(spec)
    raw = raw_tensors(graph)
    base = Path(scenario).resolve().parent
    fmt = section.format
    if data_dir and fmt != "synthetic":
        raise DataError(f"--data: the scenario's data section reads {fmt} data; --data names a "
                        "generated dataset folder, for synthetic data only")
    if fmt == "synthetic":
        data = _synthetic(spec, section, scenario, graph, data_dir, num_samples)
    elif fmt == "criteo":
        data = _criteo(section, scenario, raw, base)
    elif fmt == "parquet":
        data = _parquet(section, scenario, raw, base)
    else:
        data = _factory(section, scenario, base)
    if fmt != "synthetic":
        _scan(data, raw, spec, section.max_bad_fraction, scenario)
    holdout = bool(data.get("holdout_rows") or data.get("holdout_path") or data.get("holdout"))
    return replace(spec, data=data, save_state=spec.save_state or holdout)


def _holdout_rows(holdout, total: int) -> int:
    if holdout.path:
        return 0
    return holdout.rows if holdout.rows is not None else math.ceil(holdout.fraction * total)


def _synthetic(spec, section, scenario, graph, data_dir, num_samples) -> dict:
    if section.holdout.path:
        raise DataError(f"{scenario}: data.holdout.path: only for criteo and parquet files")
    if data_dir:
        try:
            stream = BatchStream(data_dir, batch_size=spec.batch_size, graph=graph)
        except DatasetError as exc:
            raise DataError(f"--data: {exc}") from None
        _one_batch_at_least(stream.num_samples, spec.batch_size, f"--data: {data_dir} holds")
        return {"format": "synthetic"}
    if section.num_samples:
        _one_batch_at_least(section.num_samples, spec.batch_size,
                            f"{scenario}: data.num_samples:")
    elif num_samples:
        _one_batch_at_least(num_samples, spec.batch_size, "--num-samples:")
    n = section.num_samples or num_samples or max(20 * spec.batch_size, 4096)
    held = _holdout_rows(section.holdout, n)
    generate_dataset(graph, spec.data_dir, num_samples=n, seed=spec.seed, zipf_a=section.zipf_a,
                     holdout_samples=held)
    return {"format": "synthetic", "num_samples": n, "holdout_rows": held}


def _one_batch_at_least(samples: int, batch: int, what: str) -> None:
    """A training set smaller than one global batch would fill every batch with the same few
    samples again and again (a batch of 256 from 1 sample): refused, it is not a dataset."""
    if samples < batch:
        raise DataError(f"{what} {samples:,} training samples, fewer than one batch "
                        f"(workload.batch_size {batch:,}); give at least {batch:,}")


def _file(path: str, base: Path, scenario: str, field: str) -> str:
    p = (Path(path) if Path(path).is_absolute() else base / path).resolve()
    if not p.is_file():
        raise DataError(f"{scenario}: {field}: {p}: no such file")
    return str(p)


def _streamed(section, columns: dict) -> dict:
    return {"columns": columns, "hash_seed": section.hash_seed,
            "shuffle_rows": section.shuffle_rows, "dense_transform": section.dense_transform}


def _criteo(section, scenario, raw, base) -> dict:
    bags = [t.name for t in raw if t.lengths]
    if bags:
        raise DataError(f"{scenario}: data.format: the model's bag {bags[0]!r} (a multi-hot "
                        "input) reads a list column, and Criteo text has none; use parquet "
                        "(a list<int> column) or a factory")
    path = _file(section.path, base, scenario, "data.path")
    held_path = (_file(section.holdout.path, base, scenario, "data.holdout.path")
                 if section.holdout.path else "")
    train, held = None, 0  # with a held-out file, the whole main file trains: no count pass
    if not held_path:
        lines = count_lines(path)
        held = _holdout_rows(section.holdout, lines)
        train = lines - held
        if train < 1:
            raise DataError(f"{scenario}: data.holdout: holds out {held} of the {lines} lines "
                            f"of {path}, leaving none to train on")
    try:
        columns = resolve(raw, section.columns, COLUMNS, numeric=INT_COLUMNS,
                          categorical=CAT_COLUMNS)
    except MappingError as exc:
        raise DataError(f"{scenario}: data.{exc} (file {path})") from None
    return {"format": "criteo", "path": path, "holdout_path": held_path, "train_rows": train,
            "holdout_rows": held, "block_bytes": section.block_bytes, **_streamed(section, columns)}


def _parquet(section, scenario, raw, base) -> dict:
    import pyarrow.parquet as pq
    path = _file(section.path, base, scenario, "data.path")
    held_path = (_file(section.holdout.path, base, scenario, "data.holdout.path")
                 if section.holdout.path else "")
    try:
        meta = pq.ParquetFile(path)
        names, total = meta.schema_arrow.names, meta.metadata.num_rows
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise DataError(f"{scenario}: data.path: {path}: not a Parquet file ({exc})") from None
    held = _holdout_rows(section.holdout, total)
    if total - held < 1:
        raise DataError(f"{scenario}: data.holdout: holds out {held} of the {total} rows of "
                        f"{path}, leaving none to train on")
    given = {t.name: t.name for t in raw
             if t.name in names and t.width == 1 and t.role not in ("label", "lengths")}
    given.update(section.columns)
    try:
        columns = resolve(raw, given, names, label=section.label)
    except MappingError as exc:
        raise DataError(f"{scenario}: data.{exc} (file {path})") from None
    if held_path:
        missing = sorted({c for cs in columns.values() for c in cs}
                         - set(pq.ParquetFile(held_path).schema_arrow.names))
        if missing:
            raise DataError(f"{scenario}: data.holdout.path: {held_path} lacks columns {missing}")
    categorical = sorted({c for t in raw if t.role == "ids" and not t.lengths
                          for c in columns[t.name]}
                         | {c for t in raw if t.role != "lengths"
                            for c in columns[t.name][:len(t.id_columns)]})
    bags = {columns[t.name][0]: t.width for t in raw if t.lengths}  # list columns
    float_lists = sorted(columns[t.name][0] for t in raw if t.role == "weights")
    for col in bags:
        kind = meta.schema_arrow.field(col).type
        if not str(kind).startswith(("list", "large_list")):
            raise DataError(f"{scenario}: data.columns: column {col!r} of {path} is {kind}; a "
                            "bag (a multi-hot input) reads a list column")
        if col in float_lists and not _numeric_list(kind):
            raise DataError(f"{scenario}: data.columns: column {col!r} of {path} is {kind}; a "
                            "bag's per-id weights read a list of numbers")
    return {"format": "parquet", "path": path, "holdout_path": held_path, "train_rows": total - held,
            "holdout_rows": held, "categorical": categorical, "bags": bags,
            "float_lists": float_lists,
            "batch_rows": section.batch_rows,
            **_streamed(section, columns)}


def _numeric_list(kind) -> bool:
    import pyarrow as pa
    return pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type)


def _factory(section, scenario, base) -> dict:
    dirs = [str(base), str(Path.cwd())]
    try:
        load_factory(section.factory, dirs)
    except Exception as exc:
        raise DataError(f"{scenario}: data.factory: cannot load {section.factory!r}: "
                        f"{type(exc).__name__}: {exc}") from None
    return {"format": "factory", "factory": section.factory, "kwargs": dict(section.kwargs),
            "import_dirs": dirs, "holdout": section.holdout, "shuffle_rows": section.shuffle_rows}


def _scan(data: dict, raw, spec, max_bad: float, scenario: str) -> None:
    """Read what the run will read; too many malformed rows, or a factory error, is bad input."""
    where = data.get("path") or data.get("factory")
    splits = [("train", spec.steps)]
    if data.get("holdout_rows") or data.get("holdout_path") or data.get("holdout"):
        splits.append(("holdout", None))
    for split, steps in splits:
        stream = row_stream(data, raw, batch_size=spec.batch_size, seed=spec.seed, split=split)
        stream.endless = False  # one epoch at most: a second one reads the same rows again
        try:
            for n, _ in enumerate(stream.batches(), 1):
                if steps is not None and n >= steps:
                    break
        except DataStreamError as exc:
            raise DataError(f"{scenario}: data: {exc}") from None
        except Exception as exc:  # the user's factory (or a file vanishing meanwhile)
            raise DataError(f"{scenario}: data.{'factory' if data['format'] == 'factory' else 'path'}: "
                            f"{where} ({split}) raised {type(exc).__name__}: {exc}") from None
        s = stream.stats()
        if s["rows_read"] and s["bad_rows"] > max_bad * s["rows_read"]:
            first = f"; first: {s['bad_examples'][0]}" if s["bad_examples"] else ""
            name = data.get("holdout_path") if split == "holdout" and data.get("holdout_path") else where
            raise DataError(f"{name}: {s['bad_rows']:,} of {s['rows_read']:,} rows malformed "
                            f"({s['bad_rows'] / s['rows_read']:.2%}, more than "
                            f"data.max_bad_fraction {max_bad:g}){first}")
        if split == "holdout" and s["rows_read"] - s["bad_rows"] == 0:
            raise DataError(f"{scenario}: data.holdout: no good held-out rows in {where}")
