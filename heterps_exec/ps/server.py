"""A PS rank: serve one shard to the client ranks until every client has closed.

The loop receives a request header from any source on the PS group, then its payload from
that source, answers on the request's reply tag with non-blocking sends (a slow client never
blocks the others), and defers `end_step` replies until the step may end:

- staleness 0: client c's `end_step(t)` returns once every open client has ended step t; the
  summed pushes of step t are applied then, once (synchronous SGD / Adagrad semantics);
- staleness s > 0: pushes apply on arrival and `end_step(t)` returns once every open client
  has ended step t - s, so nobody runs more than s steps ahead of the slowest client.

A bad request (PSRequestError, a malformed header) gets an error reply naming the problem;
the server keeps serving.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

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
from heterps_exec.ps.tiers import compile_kernels


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
        self.sends: list = []
        self.requests = 0

    def reply(self, dst: int, tag: int, *, status=OK, value=0, payload=None, expect=0) -> None:
        """Answer on `tag`; with `expect` > 0 in one message of exactly 32 + expect bytes."""
        payload = torch.empty(0, dtype=torch.uint8) if payload is None else payload
        head = np.array([status, payload.numel(), value, 0], dtype=np.int64)
        if expect and status == OK and payload.numel() == expect:
            messages = [torch.cat([torch.from_numpy(head).view(torch.uint8), payload])]
        elif expect:
            first = torch.zeros(protocol.HEAD_BYTES + expect, dtype=torch.uint8)
            first[:protocol.HEAD_BYTES] = torch.from_numpy(head).view(torch.uint8)
            messages = [first, payload] if payload.numel() else [first]
        else:
            messages = [torch.from_numpy(head)] + ([payload] if payload.numel() else [])
        works = [dist.isend(m, dst, group=self.group, tag=tag) for m in messages]
        self.sends.append((works, messages))
        if len(self.sends) > 64:
            self.sends = [s for s in self.sends if not all(w.is_completed() for w in s[0])]

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
            self.reply(src, tag, payload=torch.from_numpy(rows).reshape(-1).view(torch.uint8),
                       expect=header[9])
            self.shard.tables[table].latency_s["pull"].append(time.perf_counter() - t0)
        elif op == PUSH:
            t0 = time.perf_counter()
            ids, grads = protocol.decode_request(header, body)
            self.shard.push(table, ids, grads)
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

    def run(self) -> dict:
        header = torch.empty(protocol.REQUEST_LEN, dtype=torch.int64)
        while self.done:
            src = dist.recv(header, group=self.group)
            h = header.tolist()
            self.requests += 1
            problem = protocol.check_header(h)
            body = torch.empty(max(h[7], 0), dtype=torch.uint8)
            if body.numel():
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
        deadline = time.monotonic() + 10.0  # replies to clients that never listen: give up
        while time.monotonic() < deadline and not all(
                w.is_completed() for works, *_ in self.sends for w in works):
            time.sleep(0.001)
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
