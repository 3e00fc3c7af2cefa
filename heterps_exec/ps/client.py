"""PSClient: a trainer rank's handle on the PS ranks (pull, push, prefetch, steps, checkpoints).

A pull de-duplicates its ids, splits them by shard (id % num_shards), sends every shard its
part at once and assembles the rows in the caller's order; `prefetch` returns the same
request as a handle to wait on later, so the next microbatch's rows travel while the current
one computes. Pushes are asynchronous: their acknowledgements are collected at `end_step`,
which also waits for the step to end on every shard (see server.py for the semantics).
Several pulls may be in flight at once (`prefetch` several batches, then `wait` in order).

`quantize` ("none", "fp16", "bf16", "int8": heterps_exec.hps.quantize) encodes the pulled rows on
the server and the pushed gradients here for the wire; the PS stores rows and optimizer state
in float32 either way. Counters: `pull_bytes` / `push_bytes` are the payload bytes that crossed
the wire (reply rows, request ids + gradients). Traffic that is not training (the end of a
run reading whole tables back for its state) is counted apart under a label
(`with client.counted_apart("state"): ...`), so the training figures mean training.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch

from heterps_exec.hps import quantize as quant
from heterps_exec.ps import protocol, transport
from heterps_exec.ps.protocol import PSError, Reply, request_parts
from heterps_exec.ps.spec import TableSpec

TIMEOUT_S = 300.0
"""How long a client waits for a reply (the engine passes its --rank-timeout)."""


def dedup(ids: torch.Tensor) -> tuple[torch.Tensor, np.ndarray]:
    """(distinct ids in order of first appearance, inverse: ids == uniq[inverse]).

    A hash table (pandas.factorize), about 3x faster than torch.unique's sort at 4096 ids."""
    codes, uniq = pd.factorize(ids.numpy())
    return (torch.from_numpy(np.ascontiguousarray(uniq, dtype=np.int64)),
            codes.astype(np.int64, copy=False))


class PullHandle:
    """Rows of one pull in flight; `wait()` -> FloatTensor[len(ids), dim]."""

    def __init__(self, client, name, uniq, inverse, parts, t0, mode):
        self.client, self.name, self.t0, self.mode = client, name, t0, mode
        self.uniq, self.inverse, self.parts = uniq, inverse, parts
        self._result = None

    def wait(self) -> torch.Tensor:
        if self._result is None:
            dim, mode = self.client.tables[self.name][1].dim, self.mode
            rows = torch.empty(self.uniq.numel(), dim, dtype=torch.float32)
            errors, wire = [], 0
            for mask, reply, _part in self.parts:
                try:
                    out = reply.wait()[1]
                except PSError as exc:  # keep receiving: every reply must be consumed
                    errors.append(str(exc))
                    continue
                wire += out.numel()
                out = (out.view(torch.float32).view(-1, dim) if mode == "none" else
                       quant.decode(out.view(-1, quant.nbytes(dim, mode)), dim, mode))
                if mask is None:
                    rows = out
                else:
                    rows[mask] = out
            if errors:
                raise PSError("; ".join(errors))
            self.rows = rows
            self._result = torch.from_numpy(np.take(rows.numpy(), self.inverse, axis=0))
            self.client._count(self.name, "pull", self.inverse.size, self.uniq.numel(),
                               time.perf_counter() - self.t0, wire)
        return self._result


class PSClient:
    """Client of the PS ranks `server_ranks` (global ranks). Collective over process group
    `group` (every PS rank's `serve` and every client construct at once): the servers'
    addresses are exchanged there, then each client opens its own stream to each server
    (transport.py) and waits at most `timeout_s` for any reply."""

    def __init__(self, group, server_ranks, tables=(), *, max_in_flight: int = 256,
                 quantize: str = "none", timeout_s: float = TIMEOUT_S):
        self.quantize = self._check_mode(quantize)
        """Wire encoding of pulls and pushes unless a call names its own."""
        import torch.distributed as dist
        self.group, self.servers = group, list(server_ranks)
        self.rank = dist.get_rank()
        addresses = transport.exchange(group, None)
        by_global = {dist.get_global_rank(group, i) if group is not None else i: a
                     for i, a in enumerate(addresses)}
        self.conns = {s: transport.Connection(by_global[s], self.rank, server=s,
                                              timeout_s=timeout_s) for s in self.servers}
        self.tables: dict[str, tuple[dict[int, int], TableSpec]] = {}
        """name -> ({server rank: the table's index on that server}, spec). Shards number
        tables in the order declarations arrive, which differs between shards when several
        clients declare different tables at once, hence one index per server."""
        self._tag = 0
        self.push_step = -1
        """The step pushes name (-1: the next to end). The async schedule sets it before
        each backward: its pushes of step t + 1 may go out before step t ends."""
        self._ending: deque = deque()
        """(step, replies) of end_steps sent and not yet waited for (end_step_async)."""
        self._acks: deque = deque()
        self._max_in_flight = max_in_flight
        self._counters: dict[str, dict] = {}
        self._apart: dict[str, dict[str, dict]] = {}
        """label -> per-table counters of traffic counted apart from training."""
        for spec in tables:
            self.declare(spec)

    def _check_mode(self, quantize: str | None) -> str:
        mode = self.quantize if quantize is None else quantize
        if mode not in quant.MODES:
            raise ValueError(f"quantize must be one of {', '.join(quant.MODES)}, got {mode!r}")
        return mode

    def _next_tag(self) -> int:
        self._tag = self._tag % (1 << 20) + 1
        return self._tag

    def call(self, dst: int, op: int, *, reply_tag: int | None = None, **kw) -> Reply:
        """Send one request (protocol.request_parts' fields) to PS rank `dst`; its Reply."""
        tag = self._next_tag() if reply_tag is None else reply_tag
        self.conns[dst].send(request_parts(op, reply_tag=tag, **kw))
        return Reply(self.conns[dst], tag)

    def _call(self, dst, op, expect=0, **kw):
        return self.call(dst, op, expect=expect, **kw), None

    def _all(self, op, **kw) -> list[tuple[int, torch.Tensor]]:
        calls = [self._call(dst, op, **kw) for dst in self.servers]
        out, errors = [], []
        for reply, _ in calls:
            try:
                out.append(reply.wait())
            except PSError as exc:
                errors.append(str(exc))
        if errors:
            raise PSError("; ".join(errors))
        return out

    def declare(self, spec: TableSpec) -> None:
        """Create table `spec` on every shard (or check it matches the one there)."""
        replies = self._all(protocol.DECLARE, payload=protocol.text_bytes(spec.to_dict()))
        self.tables[spec.name] = ({dst: v for dst, (v, _) in zip(self.servers, replies)}, spec)

    def _spec(self, table: str) -> tuple[dict[int, int], TableSpec]:
        try:
            return self.tables[table]
        except KeyError:
            raise PSError(f"unknown table {table!r} (declared: {', '.join(self.tables)})") \
                from None

    def _split(self, ids: torch.Tensor):
        """[(mask or None, server, ids)] for every shard that gets ids."""
        n = len(self.servers)
        if n == 1:
            return [(None, self.servers[0], ids)]
        shard = ids % n
        out = []
        for s, dst in enumerate(self.servers):
            mask = shard == s
            part = ids[mask]
            if part.numel():  # a shard with nothing to do gets no request
                out.append((mask, dst, part))
        return out

    def prefetch(self, table: str, ids: torch.Tensor, *, quantize: str | None = None
                 ) -> PullHandle:
        """Start pulling the rows of `ids` (any shape, int64); `.wait()` returns them
        (`quantize`: this pull's wire encoding, default the client's; "none" = exact)."""
        t0 = time.perf_counter()
        index, _ = self._spec(table)
        ids = ids.reshape(-1)
        if ids.dtype != torch.int64:
            raise PSError(f"table {table!r}: ids must be int64, got {ids.dtype}")
        uniq, inverse = dedup(ids)
        mode = self._check_mode(quantize)
        row_bytes = quant.nbytes(self.tables[table][1].dim, mode)
        if uniq.numel() * row_bytes > protocol.MAX_REPLY_BYTES * len(self.servers):
            raise PSError(f"table {table!r}: a pull of {uniq.numel()} rows would exceed the "
                          f"PS's reply limit ({protocol.MAX_REPLY_BYTES} bytes); pull in parts")
        parts = []
        for mask, dst, part in self._split(uniq):
            reply, _ = self._call(dst, protocol.PULL, table=index[dst], ids=part,
                                  quantize=quant.MODES.index(mode),
                                  expect=part.numel() * row_bytes)
            parts.append((mask, reply, part))
        return PullHandle(self, table, uniq, inverse, parts, t0, mode)

    def pull(self, table: str, ids: torch.Tensor, *, quantize: str | None = None
             ) -> torch.Tensor:
        """FloatTensor[len(ids), dim]: rows of `ids` (flattened) as of the step's start."""
        return self.prefetch(table, ids, quantize=quantize).wait()

    def push(self, table: str, ids: torch.Tensor, grads: torch.Tensor, *,
             quantize: str | None = None) -> None:
        """Send gradients (rows of `grads` belong to `ids`; repeated ids are summed here)."""
        t0 = time.perf_counter()
        mode = self._check_mode(quantize)
        index, spec = self._spec(table)
        ids = ids.reshape(-1)
        grads = grads.detach().reshape(ids.numel(), spec.dim).to(torch.float32)
        uniq, inverse = dedup(ids)
        if uniq.numel() != ids.numel():
            grads = torch.zeros(uniq.numel(), spec.dim).index_add_(
                0, torch.from_numpy(inverse), grads)
        wire = 0
        for mask, dst, part in self._split(uniq):
            g = grads if mask is None else grads[mask]
            if mode != "none":
                g = quant.encode(g, mode)
            wire += part.numel() * part.element_size() + g.numel() * g.element_size()
            self._acks.append(self._call(dst, protocol.PUSH, table=index[dst], ids=part,
                                         values=g, quantize=quant.MODES.index(mode),
                                         step=self.push_step))
        while len(self._acks) > self._max_in_flight:
            self._acks.popleft()[0].wait()
        self._count(table, "push", ids.numel(), uniq.numel(), time.perf_counter() - t0, wire)

    def _drain(self) -> None:
        errors = []
        while self._acks:
            try:
                self._acks.popleft()[0].wait()
            except PSError as exc:
                errors.append(str(exc))
        if errors:
            raise PSError("; ".join(errors))

    def wait_pushes(self) -> None:
        """Return once every push sent is acknowledged: each shard holds it (applied or
        pending its step)."""
        self._drain()

    def end_step(self, step: int) -> None:
        """This client finished step `step`: returns when the PS lets it start the next."""
        self._drain()
        self._all(protocol.END_STEP, step=step)

    def end_step_async(self, step: int) -> None:
        """Say step `step` is over here (its pushes sent, the pulls that must see the rows
        before it applies done) without waiting; `wait_step` waits for it later."""
        self._ending.append((step, [self._call(dst, protocol.END_STEP, step=step)[0]
                                    for dst in self.servers]))

    def wait_step(self, step: int) -> None:
        """Return once step `step` is applied on every shard (end_step_async sent it)."""
        errors = []
        while self._ending and self._ending[0][0] <= step:
            for reply in self._ending.popleft()[1]:
                try:
                    reply.wait()
                except PSError as exc:  # keep receiving: every reply must be consumed
                    errors.append(str(exc))
        if errors:
            raise PSError("; ".join(errors))

    def checkpoint(self, step: int, directory: str) -> None:
        """Every shard writes its rows as of the end of `step` under `directory` (atomic)."""
        self._drain()
        self._all(protocol.CHECKPOINT, step=step, payload=protocol.text_bytes(str(directory)))

    @contextmanager
    def counted_apart(self, label: str) -> Iterator[None]:
        """Count the pulls and pushes made inside under `label` (stats()["apart"][label]),
        not among the training counters."""
        saved, self._counters = self._counters, self._apart.setdefault(label, {})
        try:
            yield
        finally:
            self._counters = saved

    def stats(self) -> dict:
        """{"client": per-table pull/push counters, "servers": [per-shard, per-table tiers]},
        and "apart": {label: per-table counters} when some traffic was counted apart."""
        self._drain()
        servers = [json.loads(bytes(p.numpy())) for _, p in self._all(protocol.STATS)]
        out = {"client": _summary(self._counters), "servers": servers}
        if self._apart:
            out["apart"] = {label: _summary(c) for label, c in self._apart.items()}
        return out

    def _count(self, table, op, rows, unique, seconds, wire) -> None:
        c = self._counters.setdefault(table, {
            f"{o}_{k}": (deque(maxlen=4096) if k == "lat" else 0) for o in ("pull", "push")
            for k in ("calls", "rows", "unique_rows", "bytes", "s", "lat")})
        c[f"{op}_bytes"] += wire
        c[f"{op}_calls"] += 1
        c[f"{op}_rows"] += rows
        c[f"{op}_unique_rows"] += unique
        c[f"{op}_s"] += seconds
        c[f"{op}_lat"].append(seconds)

    def close(self) -> None:
        """Leave: the PS ranks stop once every client has closed."""
        try:
            if self._ending:
                self.wait_step(self._ending[-1][0])
            self._drain()
        finally:
            try:
                self._all(protocol.CLOSE)
            finally:
                for conn in self.conns.values():
                    conn.close()


def _summary(counters: dict[str, dict]) -> dict:
    """Per table: the counters, latency percentiles and rows/s (no raw latency lists)."""
    out = {}
    for name, c in counters.items():
        row = {k: v for k, v in c.items() if not k.endswith("_lat")}
        for op in ("pull", "push"):
            lat = np.array(c[f"{op}_lat"] or [0.0])
            row[f"{op}_p50_s"] = float(np.percentile(lat, 50))
            row[f"{op}_p99_s"] = float(np.percentile(lat, 99))
            row[f"{op}_rows_per_s"] = c[f"{op}_rows"] / max(c[f"{op}_s"], 1e-12)
        out[name] = row
    return out
