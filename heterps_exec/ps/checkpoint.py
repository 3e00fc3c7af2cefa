"""Crash-safe checkpoints of a shard: a restart sees every row as of the last checkpoint.

Layout under the trainer's checkpoint directory:
```
ps-shard-0/LATEST            "step-000000040" (the only file ever overwritten, by os.replace)
ps-shard-0/step-000000040/   meta.json + table-<i>.npz (ids, rows incl. optimizer state,
                             the pending pushes)
```
A checkpoint is written into `step-N.tmp-<pid>/`, every file fsynced, the directory renamed
to `step-N/` and fsynced, and only then is LATEST swapped. A kill -9 at any moment leaves
either the old LATEST (pointing at a complete directory) or the new one: never a torn or
half-applied row. Only rows that differ from their deterministic initial value are written
(rows written or cached since the start), so a checkpoint costs what was touched.
The live disk tier is not durable on its own: a restart rebuilds it from the checkpoint.

The checkpoint of step s holds every push of steps <= s. A synchronous run's has them all
applied. An async run's (staleness D, heterps_sim.core.asynchrony) has steps up to s - D
applied ("applied" in meta.json) and the pushes of steps s - D + 1..s pending, as the live
shard holds them (per push: its step, its client, ids, float32 gradients; the optimizer state
stays in the rows): the steps after s read rows without those updates, and a restored shard
applies them when its clients end those steps, exactly as the unbroken run does. A checkpoint
written before pending pushes were saved has none (applied = its step).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from heterps_exec.ps.shard import Shard
from heterps_exec.ps.spec import TableSpec

KEEP = 2  # complete checkpoints kept per shard


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: str, write) -> None:
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def shard_dir(root: str, shard: int) -> str:
    return os.path.join(root, f"ps-shard-{shard}")


def save(shard: Shard, step: int, root: str) -> str:
    """Write `shard` as of now under `root` as the checkpoint of step `step`: its rows (as of
    its last `end_step`) and, where that step is before `step`, the pushes of the steps after
    it up to `step` (pending); returns its directory."""
    base = shard_dir(root, shard.config.shard)
    os.makedirs(base, exist_ok=True)
    name = f"step-{step:09d}"
    final = os.path.join(base, name)
    if os.path.isdir(final):
        return final  # another client already asked for this step
    tmp = f"{final}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    applied = min(shard.step, step)
    for i, t in enumerate(shard.tables):
        keys, rows = t.tiers.snapshot()
        arrays = {"ids": t.ids_of(keys), "rows": rows, **_pending_arrays(t, applied, step)}
        _write(os.path.join(tmp, f"table-{i}.npz"),
               lambda f, arrays=arrays: np.savez(f, **arrays))
    meta = {"step": step, "applied": applied, "tables": [t.spec.to_dict() for t in shard.tables],
            "shard": shard.config.shard, "num_shards": shard.config.num_shards}
    _write(os.path.join(tmp, "meta.json"), lambda f: f.write(json.dumps(meta).encode()))
    _fsync_dir(tmp)
    os.replace(tmp, final)
    _fsync_dir(base)
    pointer = os.path.join(base, "LATEST.tmp")
    _write(pointer, lambda f: f.write(name.encode()))
    os.replace(pointer, os.path.join(base, "LATEST"))
    _fsync_dir(base)
    _prune(base, keep_from=name)
    return final


def _pending_arrays(t, applied: int, step: int) -> dict[str, np.ndarray]:
    """The pushes of steps applied + 1..step that `t` holds, as flat arrays: per push its
    step, client and number of ids; then every push's ids and gradients, concatenated."""
    due = [p for p in t.pending if applied < p[0] <= step]
    dim = t.spec.dim
    return {
        "pending_steps": np.array([p[0] for p in due], np.int64),
        "pending_sources": np.array([p[1] for p in due], np.int64),
        "pending_sizes": np.array([p[2].size for p in due], np.int64),
        "pending_ids": (np.concatenate([t.ids_of(p[2]) for p in due]) if due
                        else np.empty(0, np.int64)),
        "pending_grads": (np.concatenate([p[3] for p in due]) if due
                          else np.empty((0, dim), np.float32)),
    }


def _prune(base: str, keep_from: str) -> None:
    """Remove leftovers of crashed writes and all but the newest KEEP checkpoints."""
    done = sorted(d for d in os.listdir(base) if d.startswith("step-") and ".tmp-" not in d)
    for d in os.listdir(base):
        stale_tmp = ".tmp-" in d and d.split(".tmp-")[1] != str(os.getpid())
        old = d in done[:-KEEP] and d < keep_from
        if stale_tmp or old:
            shutil.rmtree(os.path.join(base, d), ignore_errors=True)


def latest(root: str, shard: int) -> str | None:
    """Directory of the last complete checkpoint of `shard`, or None."""
    base = shard_dir(root, shard)
    try:
        with open(os.path.join(base, "LATEST")) as f:
            return os.path.join(base, f.read().strip())
    except FileNotFoundError:
        return None


def load(path: str) -> tuple[int, list[tuple[TableSpec, np.ndarray, np.ndarray]]]:
    """(step, [(spec, ids, rows)]) of one checkpoint directory."""
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    tables = []
    for i, d in enumerate(meta["tables"]):
        with np.load(os.path.join(path, f"table-{i}.npz")) as z:
            tables.append((TableSpec.from_dict(d), z["ids"], z["rows"]))
    return meta["step"], tables


Push = tuple[int, int, np.ndarray, np.ndarray]
"""A pending push: (step, client, ids, float32 gradients (len(ids), dim))."""


def load_pending(path: str) -> tuple[int, list[list[Push]]]:
    """(the last step applied, per table its pending pushes in order of arrival) of one
    checkpoint directory; a checkpoint without them has its own step applied."""
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    tables = []
    for i in range(len(meta["tables"])):
        with np.load(os.path.join(path, f"table-{i}.npz")) as z:
            if "pending_steps" not in z.files or not z["pending_steps"].size:
                tables.append([])
                continue
            ends = np.cumsum(z["pending_sizes"])
            ids = np.split(z["pending_ids"], ends[:-1])
            grads = np.split(z["pending_grads"], ends[:-1])
            tables.append([(int(s), int(c), k, g) for s, c, k, g in zip(
                z["pending_steps"].tolist(), z["pending_sources"].tolist(), ids, grads,
                strict=True)])
    return meta.get("applied", meta["step"]), tables


def common_step(root: str, num_shards: int) -> int | None:
    """The newest step every shard has a complete checkpoint of (shards write in parallel, so
    a crash can leave one shard a checkpoint ahead; it keeps the previous one too)."""
    steps = []
    for s in range(num_shards):
        path = latest(root, s)
        if path is None:
            return None
        steps.append(int(os.path.basename(path).split("-")[1]))
    return min(steps)


def resume_problem(root: str, step: int, num_shards: int) -> str | None:
    """Why the PS of `num_shards` ranks cannot resume at `step` from `root` (the checkpoint
    directory's ps/ folder), or None: every shard's checkpoint of that step is there, whole,
    written by a PS of as many shards (rows are split by id % shards: another count would
    silently lose rows), and with num_shards 0 no PS checkpoint of that step is there (the
    trainers' checkpoint then lacks the tables the PS held). Read before any rank starts."""
    from heterps_sim.core.files import UserFileError, read_mapping
    name = f"step-{step:09d}"
    if num_shards == 0:
        if os.path.isdir(os.path.join(shard_dir(root, 0), name)):
            return (f"{root}: step {step + 1} was saved with its tables on parameter-server "
                    "ranks; resume with the same --ps-shards")
        return None
    for s in range(num_shards):
        path = os.path.join(shard_dir(root, s), name)
        try:
            meta = read_mapping(Path(path) / "meta.json")
        except UserFileError as exc:
            return f"{exc} (no complete PS checkpoint of step {step + 1} for shard {s})"
        want = {"step": step, "shard": s, "num_shards": num_shards}
        wrong = {k: meta.get(k) for k, v in want.items() if meta.get(k) != v}
        if wrong:
            return (f"{path}/meta.json: {', '.join(f'{k} {v!r}' for k, v in wrong.items())}, "
                    f"expected {', '.join(f'{k} {want[k]}' for k in wrong)} (--ps-shards "
                    f"{num_shards})")
        tables = meta.get("tables")
        if not isinstance(tables, list):
            return f"{path}/meta.json: tables: expected a list"
        missing = [i for i in range(len(tables))
                   if not os.path.isfile(os.path.join(path, f"table-{i}.npz"))]
        if missing:
            return f"{path}: table-{missing[0]}.npz missing"
    if os.path.isdir(os.path.join(shard_dir(root, num_shards), name)):
        return (f"{root}: step {step + 1} was saved by more than {num_shards} PS shards; resume "
                "with the same --ps-shards")
    return None


def restore(shard: Shard, root: str, step: int | None = None) -> int | None:
    """Load the last checkpoint (or that of `step`) of `shard` under `root` into it: rows and
    pending pushes, `shard.step` the last step applied; returns the checkpoint's step, or None
    when there is none."""
    if step is None:
        path = latest(root, shard.config.shard)
        if path is None:
            return None
    else:
        path = os.path.join(shard_dir(root, shard.config.shard), f"step-{step:09d}")
    step, tables = load(path)
    applied, pending = load_pending(path)
    for (spec, ids, rows), pushes in zip(tables, pending, strict=True):
        t = shard.tables[shard.declare(spec)]
        t.tiers.cold.write(t.keys_of(ids), rows)
        t.pending = [(s, c, t.keys_of(k), g) for s, c, k, g in pushes]
    shard.step = applied
    return step
