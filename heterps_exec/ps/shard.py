"""One parameter-server shard: its tables, the sparse optimizer, step bookkeeping, counters.

Pure numpy (no torch), so it can be tested, replayed and crash-tested without a process
group; `server.py` puts it behind torch.distributed.

Step semantics (staleness 0): pulls during step t see the rows as of the start of step t;
pushes are summed per row and applied once, at `end_step(t)`, which the server calls when every
client has ended step t. A push may name its step (the async schedule's pushes of step t + 1
arrive before step t ends): `end_step(t)` applies the pushes of steps up to t and those that
name none. The sum takes the pushes client by client (each client's in the order it sent
them), so a step's update does not depend on which client's push arrived first: a run, and a
run resumed with the pushes a checkpoint held pending (checkpoint.py), give the same bytes.
With staleness > 0 a push is applied as soon as it arrives.
The optimizer state sits in the row itself (`TableSpec.width`): row, then Adagrad's
accumulator, so every tier and every checkpoint moves the two together.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque

import numpy as np

from heterps_exec.model.rows import initial_rows
from heterps_exec.ps.spec import MAX_TABLES, PSRequestError, ShardConfig, TableSpec
from heterps_exec.ps.store import MemmapStore, RocksStore
from heterps_sim.tiers.policies import make_policy
from heterps_sim.tiers.tiers import TieredRows


def sum_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys, float32 per-key sums of `values` rows), sorted by key."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return k[starts], np.add.reduceat(values[order], starts, axis=0).astype(np.float32)


class Table:
    """One table on one shard: id <-> local key, tiers, pending gradients, counters."""

    def __init__(self, spec: TableSpec, config: ShardConfig, index: int, work_dir: str):
        self.spec, self.config = spec, config
        hot, warm = config.capacities(spec)
        path = os.path.join(work_dir, f"shard-{config.shard}", f"table-{index}")
        if spec.rows is None:
            self.key_space, self._keys, self._ids = 1024, {}, np.empty(1024, np.int64)
            cold = RocksStore(path + ".rocks", spec.width)
        else:
            self.key_space = -(-spec.rows // config.num_shards)
            cold = MemmapStore(path + ".rows", self.key_space, spec.width)
        policy = make_policy(config.policy, hot, self.key_space, passes=config.passes)
        self.tiers = TieredRows(policy, warm, spec.width, cold, self._init)
        self.pending: list[tuple[int, int, np.ndarray, np.ndarray]] = []
        """(step the push named, -1: none; the client that sent it; keys; gradients), not
        applied yet, in order of arrival."""
        self.rows_pulled = self.rows_pushed = self.bytes_in = self.bytes_out = 0
        self.latency_s = {"pull": deque(maxlen=4096), "push": deque(maxlen=4096)}

    # ids <-> dense local keys
    def keys_of(self, ids: np.ndarray) -> np.ndarray:
        n = self.config.num_shards
        if self.spec.rows is not None:
            return ids // n
        keys = np.empty(ids.size, dtype=np.int64)
        for i, x in enumerate(ids.tolist()):
            k = self._keys.get(x)
            if k is None:
                k = self._keys[x] = len(self._keys)
                if k >= self._ids.size:
                    self._ids = np.resize(self._ids, 2 * self._ids.size)
                self._ids[k] = x
            keys[i] = k
        if len(self._keys) > self.key_space:
            self.key_space = 2 * len(self._keys)
            self.tiers.grow(self.key_space)
        return keys

    def ids_of(self, keys: np.ndarray) -> np.ndarray:
        if self.spec.rows is not None:
            return keys * self.config.num_shards + self.config.shard
        return self._ids[keys]

    def _init(self, keys: np.ndarray) -> np.ndarray:
        s = self.spec
        rows = np.full((len(keys), s.width), s.initial_accumulator, dtype=np.float32)
        rows[:, :s.dim] = initial_rows(s.name, self.ids_of(keys), s.dim, self.config.seed)
        return rows

    # the optimizer
    def apply(self, keys: np.ndarray, grads: np.ndarray) -> None:
        """One optimizer step on distinct `keys` with summed `grads` (torch's formulas)."""
        s = self.spec
        rows = self.tiers.peek(keys)
        w = rows[:, :s.dim]
        if s.optimizer == "sgd":
            w += np.float32(-s.lr) * grads
        else:  # torch.optim.Adagrad: state_sum += g*g; p.addcdiv_(g, sqrt(state_sum)+eps, -lr)
            acc = rows[:, s.dim:]
            acc += grads * grads
            w += (np.float32(-s.lr) * grads) / (np.sqrt(acc) + np.float32(s.eps))
        self.tiers.write(keys, rows)

    def apply_pending(self, step: int) -> None:
        """Apply, summed, the pushes of steps up to `step` and those naming no step (client by
        client: the sum's order is the same whichever client's push arrived first)."""
        due = sorted((p for p in self.pending if p[0] <= step), key=lambda p: p[1])  # stable
        if due:
            self.pending = [p for p in self.pending if p[0] > step]
            keys = np.concatenate([p[2] for p in due])
            grads = np.concatenate([p[3] for p in due])
            self.apply(*sum_by_key(keys, grads))

    def stats(self) -> dict:
        counts = dict(self.tiers.counts)
        total = max(sum(counts.values()), 1)
        out = {f"{t}_hits": v for t, v in counts.items()}
        out.update({f"{t}_hit_rate": v / total for t, v in counts.items()})
        out.update(rows_pulled=self.rows_pulled, rows_pushed=self.rows_pushed,
                   bytes_in=self.bytes_in, bytes_out=self.bytes_out)
        for op, lat in self.latency_s.items():
            a = np.array(lat) if lat else np.zeros(1)
            out[f"{op}_p50_s"], out[f"{op}_p99_s"] = (float(np.percentile(a, 50)),
                                                      float(np.percentile(a, 99)))
            out[f"{op}_busy_s"] = float(a.sum()) if lat else 0.0
        return out


class Shard:
    """The tables of one PS rank; every method validates its input (`PSRequestError`)."""

    def __init__(self, config: ShardConfig):
        self.config = config
        self._tmp = None if config.work_dir else tempfile.TemporaryDirectory(prefix="heterps-ps-")
        self.work_dir = config.work_dir or self._tmp.name
        self.tables: list[Table] = []
        self.index: dict[str, int] = {}
        self.step = -1  # last step applied

    def declare(self, spec: TableSpec) -> int:
        """Index of table `spec` (created on first declaration; a conflicting one is refused)."""
        i = self.index.get(spec.name)
        if i is not None:
            if self.tables[i].spec != spec:
                raise PSRequestError(f"table {spec.name!r} already declared as "
                                     f"{self.tables[i].spec}, not {spec}")
            return i
        if len(self.tables) >= MAX_TABLES:
            raise PSRequestError(f"table {spec.name!r}: this shard holds {MAX_TABLES} tables "
                                 "already")
        ram, disk = self.config.footprint(spec)
        used = [self.config.footprint(t.spec) for t in self.tables]
        if ram + sum(r for r, _ in used) > self.config.max_ram_bytes:
            raise PSRequestError(f"table {spec.name!r} needs {ram / 2**30:.3g} GiB of RAM on "
                                 f"this shard; with the tables declared before it exceeds the "
                                 f"shard's {self.config.max_ram_bytes / 2**30:.3g} GiB")
        if disk + sum(d for _, d in used) > self.config.max_disk_bytes:
            raise PSRequestError(f"table {spec.name!r} needs {disk / 2**30:.3g} GiB of disk "
                                 f"tier on this shard; past the shard's "
                                 f"{self.config.max_disk_bytes / 2**30:.3g} GiB")
        try:
            table = Table(spec, self.config, len(self.tables), self.work_dir)
        except (OSError, MemoryError, ValueError, OverflowError) as exc:  # e.g. the memmap
            raise PSRequestError(f"table {spec.name!r}: cannot create it on this shard "
                                 f"({type(exc).__name__}: {exc})") from None
        self.tables.append(table)
        self.index[spec.name] = len(self.tables) - 1
        return len(self.tables) - 1

    def table(self, index: int) -> Table:
        if not 0 <= index < len(self.tables):
            raise PSRequestError(f"unknown table index {index} "
                                 f"({len(self.tables)} tables declared)")
        return self.tables[index]

    def _check_ids(self, t: Table, ids) -> np.ndarray:
        if not isinstance(ids, np.ndarray) or ids.dtype != np.int64 or ids.ndim != 1:
            raise PSRequestError(f"table {t.spec.name!r}: ids must be a 1-D int64 array, got "
                                 f"{getattr(ids, 'dtype', type(ids))} {getattr(ids, 'shape', '')}")
        if ids.size:
            lo, hi = int(ids.min()), int(ids.max())
            if lo < 0:
                raise PSRequestError(f"table {t.spec.name!r}: negative id {lo}")
            if t.spec.rows is not None and hi >= t.spec.rows:
                raise PSRequestError(f"table {t.spec.name!r}: id {hi} >= rows {t.spec.rows}")
            c = self.config
            if c.num_shards > 1 and np.any(ids % c.num_shards != c.shard):
                raise PSRequestError(f"table {t.spec.name!r}: id not owned by shard {c.shard} "
                                     f"of {c.num_shards} (id % shards must equal it)")
        return ids

    def pull(self, index: int, ids) -> np.ndarray:
        """float32 (len(ids), dim): the rows of `ids` (counted, promoted; clients send each id
        once per request, a repeated one is served and counted twice)."""
        t = self.table(index)
        ids = self._check_ids(t, ids)
        rows = t.tiers.read(t.keys_of(ids))[:, :t.spec.dim]
        t.rows_pulled += ids.size
        t.bytes_in += ids.nbytes
        t.bytes_out += rows.nbytes
        return rows

    def push(self, index: int, ids, grads, step: int = -1, source: int = 0) -> None:
        """Gradients of `ids`, float32 (len(ids), dim); a repeated id's gradients add up.
        `step`: the step they belong to (-1: the next step to end); `source`: the client that
        sent them (a step's pushes are summed client by client)."""
        t = self.table(index)
        ids = self._check_ids(t, ids)
        want = (ids.size, t.spec.dim)
        if not isinstance(grads, np.ndarray) or grads.dtype != np.float32 or grads.shape != want:
            raise PSRequestError(f"table {t.spec.name!r}: gradients must be float32 {want}, got "
                                 f"{getattr(grads, 'dtype', type(grads))} "
                                 f"{getattr(grads, 'shape', '')}")
        t.rows_pushed += ids.size
        t.bytes_in += ids.nbytes + grads.nbytes
        keys = t.keys_of(ids)
        if self.config.staleness == 0:
            if 0 <= step <= self.step:
                raise PSRequestError(f"a push for step {step}, which has ended (last ended "
                                     f"{self.step})")
            t.pending.append((step, source, keys, grads.copy()))
        else:
            t.apply(*sum_by_key(keys, grads))

    def end_step(self, step: int) -> None:
        """Step `step` is over for every client: apply its pushes, advance the policies."""
        for t in self.tables:
            t.apply_pending(step)
            t.tiers.end_pass()
        self.step = step

    def stats(self) -> dict:
        return {t.spec.name: t.stats() for t in self.tables}

    def close(self) -> None:
        for t in self.tables:
            t.tiers.cold.close()
        if self._tmp is not None:
            self._tmp.cleanup()
