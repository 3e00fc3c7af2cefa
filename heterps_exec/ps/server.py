"""A PS rank: serve one shard to the client ranks until every client has closed.

The loop receives a request header from any source on the PS group, then its payload from
that source, answers on the request's reply tag with non-blocking sends (a slow client never
blocks the others), and defers `end_step` replies until the step may end:

- staleness 0: client c's `end_step(t)` returns once every open client has ended step t; the
  summed pushes of step t are applied then, once (synchronous SGD / Adagrad semantics);
- staleness s > 0: pushes apply on arrival and `end_step(t)` returns once every open client
  has ended step t - s, so nobody runs more than s steps ahead of the slowest client.

No request can stop the server. A bad one (a malformed or out-of-range header, a message
shorter than its header, an unknown table, a wrong shape, a table past the shard's budget, a
checkpoint outside the configured directory, a step out of order) gets an error reply naming
the problem, and the server goes on serving; only a request with no valid reply tag cannot be
answered (it is counted). Every size is checked before anything is allocated (protocol.py).
Requests arrive in one reused buffer, zeroed where a request was read. A gloo send only
completes once its receiver has posted the receive (PSClient posts it before sending the
request) and its work must be waited on to be released: the server keeps at most
`SEND_WINDOW` replies (and `SEND_WINDOW_BYTES`) per client in flight and waits for the oldest
beyond that, at most `stall_timeout_s`; a client that stops reading its replies for that long
is dropped (no more replies, its steps no longer awaited), so it cannot grow the server's
memory. A client that sends a header announcing a payload and then no payload is dropped the
same way after `stall_timeout_s`.
"""

from __future__ import annotations

import os
import sys
import threading
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
SEND_WINDOW_BYTES = 512 << 20
"""Bytes of replies per client that may be in flight before the server waits on one."""
STALL_TIMEOUT_S = 60.0
"""A client that reads no reply (or sends no announced payload) for this long is dropped."""
MAX_STEP_GAP = 1024
"""`end_step(t)` may skip at most this many steps past the client's last (each one applied)."""


class _Outbox:
    """One client's replies in flight. A gloo send's work must be waited on to be released,
    and a wait that times out closes the connection, so a thread waits on them in order (no
    timeout) and the server only looks at how many are left."""

    def __init__(self):
        self.queue: deque = deque()  # (works, messages, bytes), oldest first
        self.bytes = 0
        self.cv = threading.Condition()
        threading.Thread(target=self._run, daemon=True, name="ps-outbox").start()

    def put(self, works, messages) -> None:
        size = sum(m.numel() * m.element_size() for m in messages)
        with self.cv:
            self.queue.append((works, messages, size))
            self.bytes += size
            self.cv.notify_all()

    def wait_below(self, count: int, nbytes: int, timeout_s: float) -> bool:
        """Whether at most `count` replies (and `nbytes`) are left in flight within
        `timeout_s` (one reply is always allowed however large)."""
        with self.cv:
            return self.cv.wait_for(lambda: len(self.queue) <= count and (
                self.bytes <= nbytes or len(self.queue) <= 1), timeout_s)

    def _run(self) -> None:
        while True:
            with self.cv:
                self.cv.wait_for(lambda: self.queue)
                works, _, size = self.queue[0]
            try:
                for w in works:
                    w.wait()
            except RuntimeError:  # the connection is gone: nothing to wait for any more
                pass
            with self.cv:
                self.queue.popleft()
                self.bytes -= size
                self.cv.notify_all()


class _Server:
    def __init__(self, group, client_ranks, config: ShardConfig, restore_dir, restore_step,
                 checkpoint_dir=None, stall_timeout_s: float = STALL_TIMEOUT_S):
        self.group = group
        self.shard = Shard(config)
        self.restored_step = (checkpoint.restore(self.shard, restore_dir, restore_step)
                              if restore_dir else None)
        root = checkpoint_dir if checkpoint_dir is not None else restore_dir
        self.checkpoint_root = os.path.realpath(root) if root else None
        start = -1 if self.restored_step is None else self.restored_step
        self.done = dict.fromkeys(client_ranks, start)  # open clients -> last step ended
        self.applied = start
        self.waiting: list[tuple[int, int, int]] = []  # (client, step, reply tag)
        self.sends: dict[int, _Outbox] = {}  # client -> its replies in flight
        self.stall_timeout_s = stall_timeout_s
        self.dropped: dict[int, str] = {}  # client -> why it is no longer served
        self.abandoned: list = []  # receives a dropped client never fed (gloo may still fill)
        self.requests = self.unanswered = 0

    def drop(self, client: int, why: str) -> None:
        """Stop serving `client` (it broke the protocol): no more replies, steps not awaited."""
        self.dropped[client] = why
        self.done.pop(client, None)
        self.waiting = [w for w in self.waiting if w[0] != client]
        print(f"PS shard {self.shard.config.shard}: dropped client rank {client}: {why}",
              file=sys.stderr, flush=True)
        self.advance()

    def send(self, dst: int, tag: int, messages: list) -> None:
        if dst in self.dropped:
            self.unanswered += 1
            return
        works = [dist.isend(m, dst, group=self.group, tag=tag) for m in messages]
        outbox = self.sends.get(dst) or self.sends.setdefault(dst, _Outbox())
        outbox.put(works, messages)
        if not outbox.wait_below(SEND_WINDOW, SEND_WINDOW_BYTES, self.stall_timeout_s):
            self.abandoned.append(self.sends.pop(dst))  # gloo still owns these buffers
            self.drop(dst, f"read no reply for {self.stall_timeout_s:g} s")

    @staticmethod
    def _wait_all(works, timeout_s: float) -> bool:
        """Whether `works` completed within `timeout_s`. The waiting happens in a helper
        thread: gloo closes the connection to a peer when a wait on it times out (which would
        end the server's receive from anyone), so a work that does not complete is left to
        that thread, never timed out."""
        done = threading.Event()

        def wait():
            try:
                for w in works:
                    w.wait()
            except RuntimeError:  # the connection went away: nothing left to wait for
                pass
            done.set()

        if all(w.is_completed() for w in works):
            return True
        threading.Thread(target=wait, daemon=True, name="ps-wait").start()
        return done.wait(timeout_s)

    def reply(self, dst: int, tag: int, *, status=OK, value=0, payload=None) -> None:
        """Answer on `tag`: a header, then the payload if there is one."""
        payload = torch.empty(0, dtype=torch.uint8) if payload is None else payload
        head = torch.tensor([status, payload.numel(), value, 0], dtype=torch.int64)
        self.send(dst, tag, [head] + ([payload] if payload.numel() else []))

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
        for outbox in self.sends.values():
            outbox.wait_below(0, 0, max(deadline - time.monotonic(), 0.001))
        self.sends.clear()

    def error(self, dst: int, tag: int, message: str) -> None:
        """An error reply: its header then the message (the client's receive, posted for
        a header and `expect` bytes of rows, takes a shorter message)."""
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
            self.shard.push(table, ids, decoded)
            self.shard.tables[table].bytes_in += grads.nbytes - decoded.nbytes
            self.reply(src, tag)
            self.shard.tables[table].latency_s["push"].append(time.perf_counter() - t0)
        elif op == DECLARE:
            spec = TableSpec.from_dict(protocol.json.loads(bytes(body.numpy())))
            self.reply(src, tag, value=self.shard.declare(spec))
        elif op == END_STEP:
            last = self.done[src]
            if any(w[0] == src for w in self.waiting):
                raise PSRequestError("end_step while this client's previous end_step waits")
            if not 0 <= step <= last + MAX_STEP_GAP:
                raise PSRequestError(f"end_step({step}) after step {last}: steps are >= 0 and "
                                     f"skip at most {MAX_STEP_GAP}")
            self.done[src] = max(last, step)
            self.waiting.append((src, step, tag))
            self.advance()
        elif op == CHECKPOINT:
            where = self.checkpoint_path(bytes(body.numpy()).decode())
            if not 0 <= step <= self.applied:
                raise PSRequestError(f"checkpoint of step {step} asked before the step ended "
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

    def run(self) -> dict:
        size = protocol.REQUEST_BYTES + protocol.INLINE_BYTES + protocol.TRAILER_BYTES
        message = torch.zeros(size, dtype=torch.uint8)
        raw = message.numpy()
        head = message[:protocol.REQUEST_BYTES].view(torch.int64)
        while self.done:
            src = dist.recv(message, group=self.group)
            h = head.tolist()
            self.requests += 1
            used = size  # bytes of the buffer to zero afterwards (all, unless well-framed)
            try:
                problem, body = self.receive(src, h, raw, message)
                if body is not None and protocol.is_inline(h[7]):
                    used = protocol.REQUEST_BYTES + h[7] + protocol.TRAILER_BYTES
                elif body is not None:
                    used = protocol.REQUEST_BYTES + protocol.TRAILER_BYTES
                if src in self.dropped or body is None and problem is None:
                    self.unanswered += 1
                elif not 0 < h[8] < protocol.TAG_LIMIT:
                    self.unanswered += 1  # no tag to answer on
                elif problem is not None:
                    self.error(src, h[8], f"bad request from rank {src}: {problem}")
                elif src not in self.done and h[0] != CLOSE:
                    self.error(src, h[8], f"rank {src} is not an open client of this PS")
                else:
                    try:
                        self.handle(src, h, body)
                    except Exception as exc:  # noqa: BLE001 - any request's failure is its own
                        self.error(src, h[8], f"{protocol.OP_NAMES[h[0]]}: "
                                   f"{exc if isinstance(exc, PSRequestError | ValueError) else repr(exc)}")
            finally:
                raw[:used] = 0  # nothing of this request can be read as part of the next
        self.flush()
        stats = self.shard.stats()
        self.shard.close()
        return stats

    def receive(self, src: int, h: list[int], raw: np.ndarray, message: torch.Tensor):
        """(problem or None, body or None) of the request whose header is `h`: its framing
        and sizes checked before anything is allocated, a payload that follows the header
        received. body None and problem None: the client was dropped while sending it."""
        problem = protocol.check_header(h)
        if problem is not None:
            return problem, None
        nbytes = h[7]
        if protocol.is_inline(nbytes):
            if not protocol.ends_at(raw, protocol.REQUEST_BYTES + nbytes, h):
                return (f"message shorter than its header says ({nbytes} payload bytes), or "
                        "not framed by PSClient"), None
            return None, message[protocol.REQUEST_BYTES:protocol.REQUEST_BYTES + nbytes]
        if not protocol.ends_at(raw, protocol.REQUEST_BYTES, h):
            return "header not framed by PSClient (no trailer after it)", None
        body = torch.zeros(nbytes + protocol.TRAILER_BYTES, dtype=torch.uint8)
        work = dist.irecv(body, src, group=self.group)
        if not self._wait_all([work], self.stall_timeout_s):
            self.abandoned.append((work, body))
            self.drop(src, f"announced {nbytes} payload bytes and sent none for "
                      f"{self.stall_timeout_s:g} s")
            return None, None
        if not protocol.ends_at(body.numpy(), nbytes, h):
            return f"payload shorter than the {nbytes} bytes its header says", None
        return None, body[:nbytes]

def serve(group, client_ranks, config: ShardConfig, *, restore_dir: str | None = None,
          restore_step: int | None = None, checkpoint_dir: str | None = None,
          stall_timeout_s: float = STALL_TIMEOUT_S) -> dict:
    """Serve shard `config.shard` to `client_ranks` (global ranks in `group`) until all of
    them have called `PSClient.close()`; returns the final per-table counters.

    `restore_dir`: the trainer's checkpoint directory; the shard starts from its last
    checkpoint there (if any; `restore_step`: that step's, see `checkpoint.common_step`) and
    clients continue at the step after it. `checkpoint_dir` (default: `restore_dir`): the
    only directory checkpoint requests may write under; None and no restore_dir: checkpoint
    requests are refused. `stall_timeout_s`: how long a client may leave replies unread (or
    an announced payload unsent) before it is dropped."""
    torch.set_num_threads(1)
    compile_kernels()
    return _Server(group, list(client_ranks), config, restore_dir, restore_step,
                   checkpoint_dir, stall_timeout_s).run()
