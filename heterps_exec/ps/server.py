"""A PS rank: serve one shard to the client ranks until every client has closed.

The loop receives a request header from any source on the PS group, then its payload from
that source, answers on the request's reply tag with non-blocking sends (a slow client never
blocks the others), and defers `end_step` replies until the step may end:

- staleness 0: client c's `end_step(t)` returns once every open client has ended step t; the
  summed pushes of step t are applied then, once (synchronous SGD / Adagrad semantics);
- staleness s > 0: pushes apply on arrival and `end_step(t)` returns once every open client
  has ended step t - s, so nobody runs more than s steps ahead of the slowest client.

A bad request (PSRequestError, a malformed header) gets an error reply naming the problem;
the server keeps serving. Requests arrive in one reused buffer (protocol.py); a gloo send only
completes once its receiver has posted the receive (PSClient posts it before sending the
request), and its work must be waited on to be released, so the server keeps the last
`SEND_WINDOW` replies per client in flight and waits on the oldest beyond that.
"""

from __future__ import annotations

import datetime
import time
from collections import deque

import numpy as np
import torch
import torch.distributed as dist

from heterps_exec.hps import quantize
from heterps_exec.ps import checkpoint, protocol
from heterps_exec.ps.protocol import (
    CHECKPOINT,
    CLOSE,
    DECLARE,
    END_STEP,
    ERROR,
    OK,
    PULL,
    PUSH,
    STATS,
)
from heterps_exec.ps.shard import Shard
from heterps_exec.ps.spec import PSRequestError, ShardConfig, TableSpec
from heterps_sim.tiers.tiers import compile_kernels

SEND_WINDOW = 64
"""Replies per client whose sends may still be in flight before the server waits on one."""


class _Server:
    def __init__(self, group, client_ranks, config: ShardConfig, restore_dir, restore_step):
        self.group = group
        self.shard = Shard(config)
        self.restored_step = (checkpoint.restore(self.shard, restore_dir, restore_step)
                              if restore_dir else None)
        start = -1 if self.restored_step is None else self.restored_step
        self.done = dict.fromkeys(client_ranks, start)  # open clients -> last step ended
        self.applied = start
        self.waiting: list[tuple[int, int, int]] = []  # (client, step, reply tag)
        self.sends: dict[int, deque] = {}  # client -> (works, messages) not yet waited on
        self.requests = 0

    def send(self, dst: int, tag: int, messages: list) -> None:
        works = [dist.isend(m, dst, group=self.group, tag=tag) for m in messages]
        pending = self.sends.setdefault(dst, deque())
        pending.append((works, messages))
        while len(pending) > SEND_WINDOW:  # the client has posted its receive: no waiting
            for w in pending.popleft()[0]:
                w.wait()

    def reply(self, dst: int, tag: int, *, status=OK, value=0, payload=None, expect=0) -> None:
        """Answer on `tag`; with `expect` > 0 the first message is exactly 32 + expect bytes."""
        payload = torch.empty(0, dtype=torch.uint8) if payload is None else payload
        head = torch.tensor([status, payload.numel(), value, 0], dtype=torch.int64)
        if expect:
            first = torch.zeros(protocol.HEAD_BYTES + expect, dtype=torch.uint8)
            first[:protocol.HEAD_BYTES] = head.view(torch.uint8)
            messages = [first, payload] if payload.numel() else [first]
        else:
            messages = [head] + ([payload] if payload.numel() else [])
        self.send(dst, tag, messages)

    def reply_rows(self, dst: int, header: list[int], rows: np.ndarray) -> int:
        """A pull's reply: one message, its header then the rows as the client asked for
        them (protocol.py), built in place; returns the rows' bytes on the wire."""
        mode, expect = quantize.MODES[header[10]], header[9]
        size = rows.shape[0] * quantize.nbytes(rows.shape[1], mode)
        if expect and size != expect:
            raise PSRequestError(f"the reply holds {size} bytes, the client expects {expect}")
        message = np.empty(protocol.HEAD_BYTES + size, dtype=np.uint8)
        message[:protocol.HEAD_BYTES].view(np.int64)[:] = (OK, size, 0, 0)
        body = message[protocol.HEAD_BYTES:]
        if mode == "none":
            body.view(np.float32).reshape(rows.shape)[:] = rows
        else:
            body[:] = quantize.encode(torch.from_numpy(rows), mode).numpy().reshape(-1)
        if expect:
            self.send(dst, header[8], [torch.from_numpy(message)])
        else:  # header, then payload (a client that did not say what it expects)
            self.send(dst, header[8], [torch.from_numpy(message[:protocol.HEAD_BYTES]).view(
                torch.int64)] + ([torch.from_numpy(body)] if size else []))
        return size

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait for the replies still in flight (clients that never listen: give up)."""
        deadline = time.monotonic() + timeout_s
        for pending in self.sends.values():
            for works, _ in pending:
                for w in works:
                    left = max(deadline - time.monotonic(), 0.001)
                    try:
                        w.wait(timeout=datetime.timedelta(seconds=left))
                    except RuntimeError:
                        pass
        self.sends.clear()

    def error(self, dst: int, tag: int, message: str, expect: int = 0) -> None:
        self.reply(dst, tag, status=ERROR, payload=protocol.text_bytes(message), expect=expect)

    def advance(self) -> None:
        """Apply finished steps and release the clients allowed to go on."""
        low = min(self.done.values(), default=self.applied)
        while self.applied < low:
            self.applied += 1
            self.shard.end_step(self.applied)
        s = self.shard.config.staleness
        ready = [w for w in self.waiting if w[1] - s <= self.applied or w[0] not in self.done]
        self.waiting = [w for w in self.waiting if w not in ready]
        for client, _, tag in ready:
            self.reply(client, tag)

    def handle(self, src: int, header: list[int], body: torch.Tensor) -> None:
        op, table, _, step, *_ = header
        tag = header[8]
        if op == PULL:
            t0 = time.perf_counter()
            ids, _ = protocol.decode_request(header, body)
            rows = self.shard.pull(table, ids)
            wire = self.reply_rows(src, header, rows)
            self.shard.tables[table].bytes_out += wire - rows.nbytes  # count what was sent
            self.shard.tables[table].latency_s["pull"].append(time.perf_counter() - t0)
        elif op == PUSH:
            t0 = time.perf_counter()
            ids, grads = protocol.decode_request(header, body)
            decoded = self.decode_grads(table, header, grads)
            self.shard.push(table, ids, decoded)
            self.shard.tables[table].bytes_in += grads.nbytes - decoded.nbytes
            self.reply(src, tag)
            self.shard.tables[table].latency_s["push"].append(time.perf_counter() - t0)
        elif op == DECLARE:
            spec = TableSpec.from_dict(protocol.json.loads(bytes(body.numpy())))
            self.reply(src, tag, value=self.shard.declare(spec))
        elif op == END_STEP:
            self.done[src] = max(self.done[src], step)
            self.waiting.append((src, step, tag))
            self.advance()
        elif op == CHECKPOINT:
            if step > self.applied:
                raise PSRequestError(f"checkpoint of step {step} asked before the step ended "
                                     f"(last applied {self.applied})")
            checkpoint.save(self.shard, step, bytes(body.numpy()).decode())
            self.reply(src, tag, value=step)
        elif op == STATS:
            stats = {"shard": self.shard.config.shard, "requests": self.requests,
                     "applied_step": self.applied, "tables": self.shard.stats()}
            self.reply(src, tag, payload=protocol.text_bytes(stats))
        elif op == CLOSE:
            self.done.pop(src, None)
            self.reply(src, tag)
            self.advance()

    def decode_grads(self, table: int, header: list[int], grads: np.ndarray) -> np.ndarray:
        """float32 gradients of a push sent with `quantize.MODES[header[10]]`."""
        mode = quantize.MODES[header[10]]
        if mode == "none":
            return grads
        dim = self.shard.table(table).spec.dim
        width = quantize.nbytes(dim, mode)
        if grads.dtype != np.uint8 or grads.ndim != 2 or grads.shape[1] != width:
            raise PSRequestError(f"{mode} gradients must be uint8 rows of {width} bytes, got "
                                 f"{grads.dtype} {grads.shape}")
        return quantize.decode(torch.from_numpy(grads), dim, mode).numpy()

    def run(self) -> dict:
        message = torch.empty(protocol.REQUEST_BYTES + protocol.INLINE_BYTES, dtype=torch.uint8)
        head = message[:protocol.REQUEST_BYTES].view(torch.int64)
        while self.done:
            src = dist.recv(message, group=self.group)
            h = head.tolist()
            self.requests += 1
            problem = protocol.check_header(h)
            nbytes = max(h[7], 0)
            if protocol.is_inline(nbytes):
                body = message[protocol.REQUEST_BYTES:protocol.REQUEST_BYTES + nbytes]
            else:
                body = torch.empty(nbytes, dtype=torch.uint8)
                dist.recv(body, src, group=self.group)
            expect = max(h[9], 0)
            if problem is not None:
                self.error(src, max(h[8], 1), f"bad request from rank {src}: {problem}", expect)
                continue
            if src not in self.done and h[0] != CLOSE:
                self.error(src, h[8], f"rank {src} is not an open client of this PS", expect)
                continue
            try:
                self.handle(src, h, body)
            except (PSRequestError, ValueError, KeyError, TypeError) as exc:
                self.error(src, h[8], f"{protocol.OP_NAMES[h[0]]}: {exc}", expect)
        self.flush()
        stats = self.shard.stats()
        self.shard.close()
        return stats


def serve(group, client_ranks, config: ShardConfig, *, restore_dir: str | None = None,
          restore_step: int | None = None) -> dict:
    """Serve shard `config.shard` to `client_ranks` (global ranks in `group`) until all of
    them have called `PSClient.close()`; returns the final per-table counters.

    `restore_dir`: the trainer's checkpoint directory; the shard starts from its last
    checkpoint there (if any; `restore_step`: that step's, see `checkpoint.common_step`) and
    clients continue at the step after it."""
    torch.set_num_threads(1)
    compile_kernels()
    return _Server(group, list(client_ranks), config, restore_dir, restore_step).run()
