"""A PS rank: serve one shard to the client ranks until every client has closed.

The loop receives a request header from any source on the PS group, then its payload from
that source, answers on the request's reply tag with non-blocking sends (a slow client never
blocks the others), and defers `end_step` replies until the step may end:

- staleness 0: client c's `end_step(t)` returns once every open client has ended step t; the
  summed pushes of step t are applied then, once (synchronous SGD / Adagrad semantics). A
  client may have several end_steps in flight, of increasing steps (the async schedule
  sends them as soon as it may and waits for each when it needs the rows it brings);
- staleness s > 0: pushes apply on arrival and `end_step(t)` returns once every open client
  has ended step t - s, so nobody runs more than s steps ahead of the slowest client;
- a checkpoint request for step t is served once step t has ended, or (the async schedule,
  `pending_steps` D) step t - D: the steps after it are saved as the pushes pending.

No request can stop the server. A bad one (a malformed or out-of-range header, an unknown
table, a wrong shape, a table past the shard's budget, a checkpoint outside the configured
directory, a step out of order) gets an error reply naming the problem, and the server goes on
serving; only a request with no valid reply tag cannot be answered (it is counted). Clients
reach the server on their own TCP streams (transport.py), read by streams.py: every size is
checked before anything is allocated, and a client that breaks the stream (bytes that are not
a request, a payload too large to skip), stops in the middle of a request or stops reading its
replies for `stall_timeout_s` is dropped - its stream closed, its steps no longer awaited -
while the others are served on.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

from heterps_exec.hps import quantize
from heterps_exec.ps import checkpoint, protocol, transport
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
from heterps_exec.ps.streams import Streams
from heterps_sim.tiers.tiers import compile_kernels

STALL_TIMEOUT_S = 60.0
"""A client that reads no reply, or sends no byte of a request it started, for this long is
dropped (streams.py)."""
MAX_STEP_GAP = 1024
"""`end_step(t)` may skip at most this many steps past the client's last (each one applied)."""
POLL_S = 0.25
"""Longest wait for a byte before the server looks at its clients' deadlines again."""


class _Server:
    def __init__(self, group, client_ranks, config: ShardConfig, restore_dir, restore_step,
                 checkpoint_dir=None, stall_timeout_s: float = STALL_TIMEOUT_S,
                 pending_steps: int = 0):
        self.shard = Shard(config)
        self.pending_steps = pending_steps
        self.restored_step = (checkpoint.restore(self.shard, restore_dir, restore_step)
                              if restore_dir else None)
        if self.restored_step is not None:  # a checkpoint of a staler run: apply the steps
            while self.shard.step < self.restored_step - pending_steps:  # this run's read
                self.shard.end_step(self.shard.step + 1)
        root = checkpoint_dir if checkpoint_dir is not None else restore_dir
        self.checkpoint_root = os.path.realpath(root) if root else None
        start = -1 if self.restored_step is None else self.shard.step
        self.done = dict.fromkeys(client_ranks, start)  # open clients -> last step ended
        self.applied = start
        self.waiting: list[tuple[int, int, int]] = []  # (client, step, reply tag)
        self.stall_timeout_s = stall_timeout_s
        self.dropped: dict[int, str] = {}  # client -> why it is no longer served
        self.requests = self.unanswered = 0
        listener = transport.listen(transport.listen_address())
        transport.exchange(group, listener.getsockname()[:2])  # collective: clients learn it
        self.streams = Streams(listener, client_ranks, stall_timeout_s, self.on_request,
                               self.drop)

    def drop(self, client: int, why: str) -> None:
        """Stop serving `client` (it broke the protocol, stalled or left): no more replies,
        steps not awaited."""
        if client in self.dropped or client not in self.done:
            return  # already dropped, or it had closed (then leaving is no news)
        self.dropped[client] = why
        self.done.pop(client, None)
        self.waiting = [w for w in self.waiting if w[0] != client]
        print(f"PS shard {self.shard.config.shard}: dropped client rank {client}: {why}",
              file=sys.stderr, flush=True)
        self.streams.drop(client, why)
        self.advance()

    def send(self, dst: int, parts: list) -> None:
        if dst in self.dropped or not self.streams.send(dst, parts):
            self.unanswered += 1

    def reply(self, dst: int, tag: int, *, status=OK, value=0, payload=None) -> None:
        """Answer on `tag`: a header, then the payload if there is one."""
        payload = torch.empty(0, dtype=torch.uint8) if payload is None else payload
        head = protocol.reply_head(status, payload.numel(), value, tag)
        self.send(dst, [head] + ([payload.numpy()] if payload.numel() else []))

    def reply_rows(self, dst: int, header: list[int], rows: np.ndarray) -> int:
        """A pull's reply: its header then the rows as the client asked for them
        (protocol.py), built in one buffer; returns the rows' bytes on the wire."""
        mode, expect = quantize.MODES[header[10]], header[9]
        size = rows.shape[0] * quantize.nbytes(rows.shape[1], mode)
        if expect and size != expect:
            raise PSRequestError(f"the reply holds {size} bytes, the client expects {expect}")
        message = np.empty(protocol.REPLY_BYTES + size, dtype=np.uint8)
        message[:protocol.REPLY_BYTES].view(np.int64)[:] = protocol.reply_head(
            OK, size, 0, header[8])
        body = message[protocol.REPLY_BYTES:]
        if mode == "none":
            body.view(np.float32).reshape(rows.shape)[:] = rows
        else:
            body[:] = quantize.encode(torch.from_numpy(rows), mode).numpy().reshape(-1)
        self.send(dst, [message])
        return size

    def error(self, dst: int, tag: int, message: str) -> None:
        """An error reply: its header then the message."""
        self.reply(dst, tag, status=ERROR, payload=protocol.text_bytes(message[:4096]))

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
        op, table, n, step, *_ = header
        tag = header[8]
        if op == PULL:
            t0 = time.perf_counter()
            spec = self.shard.table(table).spec
            size = n * quantize.nbytes(spec.dim, quantize.MODES[header[10]])
            if size > protocol.MAX_REPLY_BYTES:
                raise PSRequestError(f"{n} rows of table {spec.name!r} are {size} bytes, more "
                                     f"than a reply may hold ({protocol.MAX_REPLY_BYTES})")
            if header[9] and header[9] != size:
                raise PSRequestError(f"the reply holds {size} bytes, the client expects "
                                     f"{header[9]}")
            ids, _ = protocol.decode_request(header, body)
            rows = self.shard.pull(table, ids)
            wire = self.reply_rows(src, header, rows)
            self.shard.tables[table].bytes_out += wire - rows.nbytes  # count what was sent
            self.shard.tables[table].latency_s["pull"].append(time.perf_counter() - t0)
        elif op == PUSH:
            t0 = time.perf_counter()
            ids, grads = protocol.decode_request(header, body)
            decoded = self.decode_grads(table, header, grads)
            self.shard.push(table, ids, decoded, step, source=src)
            self.shard.tables[table].bytes_in += grads.nbytes - decoded.nbytes
            self.reply(src, tag)
            self.shard.tables[table].latency_s["push"].append(time.perf_counter() - t0)
        elif op == DECLARE:
            spec = TableSpec.from_dict(protocol.json.loads(bytes(body.numpy())))
            self.reply(src, tag, value=self.shard.declare(spec))
        elif op == END_STEP:
            last = self.done[src]
            if any(w[0] == src and w[1] >= step for w in self.waiting):
                raise PSRequestError(f"end_step({step}) while this client's end_step of a "
                                     "later or the same step waits")
            if not 0 <= step <= last + MAX_STEP_GAP:
                raise PSRequestError(f"end_step({step}) after step {last}: steps are >= 0 and "
                                     f"skip at most {MAX_STEP_GAP}")
            self.done[src] = max(last, step)
            self.waiting.append((src, step, tag))
            self.advance()
        elif op == CHECKPOINT:
            where = self.checkpoint_path(bytes(body.numpy()).decode())
            due = step - self.pending_steps  # applied by now; the later steps' pushes are in
            if step < 0 or self.applied < max(due, -1):
                what = "the step" if due == step else f"step {due}"
                raise PSRequestError(f"checkpoint of step {step} asked before {what} ended "
                                     f"(last applied {self.applied})")
            checkpoint.save(self.shard, step, where)
            self.reply(src, tag, value=step)
        elif op == STATS:
            stats = {"shard": self.shard.config.shard, "requests": self.requests,
                     "applied_step": self.applied, "unanswered": self.unanswered,
                     "dropped_clients": {str(k): v for k, v in self.dropped.items()},
                     "tables": self.shard.stats()}
            self.reply(src, tag, payload=protocol.text_bytes(stats))
        elif op == CLOSE:
            self.done.pop(src, None)
            self.reply(src, tag)
            self.advance()

    def checkpoint_path(self, path: str) -> str:
        """`path` if it is the configured checkpoint directory or inside it (symbolic links
        resolved); a PS writes nowhere else."""
        if self.checkpoint_root is None:
            raise PSRequestError("this PS was started without a checkpoint directory")
        if "\0" in path or not path:
            raise PSRequestError("checkpoint path must be non-empty, without NUL bytes")
        real = os.path.realpath(path)
        if os.path.commonpath([real, self.checkpoint_root]) != self.checkpoint_root:
            raise PSRequestError(f"checkpoint path {path!r} is outside this PS's checkpoint "
                                 f"directory {self.checkpoint_root}")
        return real

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

    def on_request(self, src: int, h: list[int], body, problem: str | None) -> None:
        """A whole request from `src` (streams.py): its payload (None when it was skipped)
        and the header's problem, if any."""
        self.requests += 1
        if src in self.dropped:
            self.unanswered += 1
        elif not 0 < h[8] < protocol.TAG_LIMIT:
            self.unanswered += 1  # no tag to answer on
        elif problem is not None:
            self.error(src, h[8], f"bad request from rank {src}: {problem}")
        elif src not in self.done and h[0] != CLOSE:
            self.error(src, h[8], f"rank {src} is not an open client of this PS")
        else:
            try:
                self.handle(src, h, torch.from_numpy(body))
            except Exception as exc:  # noqa: BLE001 - any request's failure is its own
                self.error(src, h[8], f"{protocol.OP_NAMES[h[0]]}: "
                           f"{exc if isinstance(exc, PSRequestError | ValueError) else repr(exc)}")

    def run(self) -> dict:
        try:
            while self.done:
                self.streams.poll(POLL_S)
            self.streams.flush(10.0)  # the last replies (close) reach their clients
        finally:
            self.streams.close()
        stats = self.shard.stats()
        self.shard.close()
        return stats


def serve(group, client_ranks, config: ShardConfig, *, restore_dir: str | None = None,
          restore_step: int | None = None, checkpoint_dir: str | None = None,
          stall_timeout_s: float = STALL_TIMEOUT_S, pending_steps: int = 0) -> dict:
    """Serve shard `config.shard` to `client_ranks` (global ranks in `group`) until all of
    them have called `PSClient.close()`; returns the final per-table counters.

    `restore_dir`: the trainer's checkpoint directory; the shard starts from its last
    checkpoint there (if any; `restore_step`: that step's, see `checkpoint.common_step`) and
    clients continue at the step after it. `checkpoint_dir` (default: `restore_dir`): the
    only directory checkpoint requests may write under; None and no restore_dir: checkpoint
    requests are refused. `stall_timeout_s`: how long a client may leave replies unread (or
    an announced payload unsent) before it is dropped. `pending_steps`: the async schedule's
    staleness D (0: synchronous). The checkpoint of step s then holds steps up to s - D
    applied and the pushes of the D steps after pending (checkpoint.py), and a restored shard
    starts with steps up to its checkpoint's step - D applied (those of a staler run's
    checkpoint applied now)."""
    torch.set_num_threads(1)
    compile_kernels()
    return _Server(group, list(client_ranks), config, restore_dir, restore_step,
                   checkpoint_dir, stall_timeout_s, pending_steps).run()
