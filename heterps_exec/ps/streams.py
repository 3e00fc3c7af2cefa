"""A PS rank's side of its clients' streams: accept, read requests, write replies, drop.

Every connection is non-blocking and read as its bytes arrive (selectors), in three steps per
request: the header and trailer (protocol.REQUEST_FRAME bytes, the only fixed read), a check
of every size in it (protocol.check_header) and only then the payload's buffer. So:

- a header announcing more than MAX_REQUEST_BYTES allocates nothing: its client gets an error
  and is dropped (its stream cannot be resynchronised); a bad header within the bound gets an
  error and its payload is read into a small scratch buffer and thrown away;
- a client that stops in the middle of a request stalls only its own stream, and one that
  sent no byte of it for `stall_timeout_s` is dropped;
- replies wait in the client's outbox; past SEND_WINDOW_BYTES the server stops reading that
  client's requests (it cannot grow the server's memory), and a client that read nothing of
  its replies for `stall_timeout_s` is dropped.

Dropping closes the connection: the client's next wait fails with a PSError at once. The
server (server.py) is told through `on_request(rank, header, body, problem)` and
`on_lost(rank, why)`; it decides what a request means, this module only moves bytes.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections import deque

import numpy as np

from heterps_exec.ps import protocol
from heterps_exec.ps.protocol import HELLO_BYTES, MAX_REQUEST_BYTES, REQUEST_FRAME
from heterps_exec.ps.transport import RECV_CHUNK, tune

SEND_WINDOW_BYTES = 512 << 20
"""Bytes of replies one client may leave unread before the server reads no more of its
requests."""
SCRATCH_BYTES = 1 << 20
"""The buffer a refused request's payload is read into and discarded."""
READS_PER_EVENT = 64
"""Reads of one connection per wake-up before the others get their turn."""
LINGER_S = 2.0
"""How long a dropped client's stream stays open to deliver its last error reply (read and
discarded meanwhile, so that closing does not reset the connection under the reply)."""


class Peer:
    """One client connection: what is being read, and the replies waiting to be written."""

    def __init__(self, sock: socket.socket, now: float):
        self.sock, self.rank = sock, None
        self.stage = "hello"  # hello | frame | body | skip | closing
        self.frame = memoryview(bytearray(REQUEST_FRAME))
        self.buffer = memoryview(bytearray(HELLO_BYTES))
        self.got = 0
        self.header: list[int] | None = None
        self.problem: str | None = None
        self.skip = 0
        self.read_at = now  # the last byte read while a request is incomplete (or connect)
        self.out: deque = deque()
        self.out_bytes = 0
        self.wrote_at = now  # the last byte written while replies wait
        self.events = 0
        self.close_at = 0.0  # closing: when the stream is closed at the latest

    def mid_request(self) -> bool:
        return self.stage in ("body", "skip") or (self.stage == "frame" and self.got > 0)


class Streams:
    """Every client stream of one PS rank. `poll()` does one round of reading and writing;
    requests and losses are handed to the callbacks as they complete."""

    def __init__(self, listener: socket.socket, clients, stall_timeout_s: float,
                 on_request, on_lost):
        self.listener, self.expected = listener, set(clients)
        self.stall_timeout_s = stall_timeout_s
        self.on_request, self.on_lost = on_request, on_lost
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ, None)
        self.by_rank: dict[int, Peer] = {}  # every rank that said hello, dropped ones too
        self.peers: set[Peer] = set()
        self.started = time.monotonic()
        self.scratch = memoryview(bytearray(SCRATCH_BYTES))
        self.refused = 0  # connections that were not a PS client's hello

    # -- the loop ------------------------------------------------------------------------
    def poll(self, timeout_s: float) -> None:
        for key, mask in self.sel.select(timeout_s):
            if key.data is None:
                self._accept()
                continue
            peer = key.data
            if mask & selectors.EVENT_WRITE and peer in self.peers:
                self._write(peer)
            if mask & selectors.EVENT_READ and peer in self.peers:
                self._read(peer)
        self._check_stalls(time.monotonic())

    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            tune(sock)
            peer = Peer(sock, time.monotonic())
            self.peers.add(peer)
            self._events(peer)

    def _events(self, peer: Peer) -> None:
        """Read unless its unread replies passed the window; write while replies wait (a
        closing stream: write its last replies, then read until the client hangs up)."""
        if peer.stage == "closing":
            want = selectors.EVENT_WRITE if peer.out else selectors.EVENT_READ
        else:
            want = (selectors.EVENT_READ if peer.out_bytes <= SEND_WINDOW_BYTES else 0) | (
                selectors.EVENT_WRITE if peer.out else 0)
        if want == peer.events:
            return
        if peer.events and want:
            self.sel.modify(peer.sock, want, peer)
        elif want:
            self.sel.register(peer.sock, want, peer)
        else:
            self.sel.unregister(peer.sock)
        peer.events = want

    # -- reading -------------------------------------------------------------------------
    def _read(self, peer: Peer) -> None:
        for _ in range(READS_PER_EVENT):
            if peer.stage == "closing":
                view = self.scratch  # what a dropped client still sends: read and thrown away
            elif peer.stage == "skip":
                view = self.scratch[:min(peer.skip - peer.got, SCRATCH_BYTES)]
            else:
                view = peer.buffer[peer.got:]
            try:
                n = peer.sock.recv_into(view, min(len(view), RECV_CHUNK))
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._lose(peer, f"connection failed ({exc.strerror or exc})")
                return
            if n == 0:
                self._lose(peer, "closed its connection" + (
                    " in the middle of a request" if peer.mid_request() else ""))
                return
            if peer.stage == "closing":
                continue
            peer.got += n
            peer.read_at = time.monotonic()
            whole = peer.skip if peer.stage == "skip" else len(peer.buffer)
            if peer.got == whole:
                self._complete(peer)
                if peer not in self.peers or not peer.events & selectors.EVENT_READ:
                    return

    def _complete(self, peer: Peer) -> None:
        """A hello, a header and trailer, a payload or a skipped payload has been read."""
        stage, peer.got = peer.stage, 0
        if stage == "hello":
            rank = protocol.read_hello(bytes(peer.buffer))
            if rank is None or rank not in self.expected or rank in self.by_rank:
                self.refused += 1
                self._close(peer)
                return
            peer.rank = rank
            self.by_rank[rank] = peer
            self._expect_frame(peer)
        elif stage == "frame":
            raw = np.frombuffer(peer.buffer, np.int64)
            header = raw[:protocol.REQUEST_LEN].tolist()
            if raw[protocol.REQUEST_LEN:].tolist() != protocol.trailer(header).tolist():
                self.drop(peer.rank, "sent bytes that are not a PSClient request (no trailer "
                          "after the header: the stream is out of step)")
                return
            problem = protocol.check_header(header)
            nbytes = header[7]
            if problem is not None and not 0 <= nbytes <= MAX_REQUEST_BYTES:
                self.on_request(peer.rank, header, None, problem)
                self.drop(peer.rank, f"announced a payload of {nbytes} bytes, which cannot be "
                          "read or skipped")
            elif problem is not None and nbytes:
                peer.stage, peer.skip, peer.header, peer.problem = "skip", nbytes, header, problem
            elif nbytes:
                peer.stage, peer.header, peer.problem = "body", header, None
                peer.buffer = memoryview(np.empty(nbytes, np.uint8))  # size checked above
            else:
                self._expect_frame(peer)
                self.on_request(peer.rank, header, np.empty(0, np.uint8), problem)
        else:  # a payload, read or skipped
            header, problem = peer.header, peer.problem
            body = None if stage == "skip" else np.frombuffer(peer.buffer, np.uint8)
            self._expect_frame(peer)
            self.on_request(peer.rank, header, body, problem)

    def _expect_frame(self, peer: Peer) -> None:
        """The next request's header and trailer go to the peer's own frame buffer (a
        payload's buffer was handed to the server with its request)."""
        peer.stage, peer.got, peer.skip, peer.header, peer.problem = "frame", 0, 0, None, None
        peer.buffer = peer.frame

    # -- writing -------------------------------------------------------------------------
    def send(self, rank: int, parts: list) -> bool:
        """Queue one reply (buffers, in order) for `rank` and write what the socket takes now;
        False when the client is gone (dropped or closed)."""
        peer = self.by_rank.get(rank)
        if peer is None or peer not in self.peers:
            return False
        if not peer.out:
            peer.wrote_at = time.monotonic()
        for part in parts:
            view = memoryview(part).cast("B")
            if len(view):
                peer.out.append(view)
                peer.out_bytes += len(view)
        self._write(peer)
        return peer in self.peers

    def _write(self, peer: Peer) -> None:
        while peer.out:
            try:
                n = peer.sock.send(peer.out[0])
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._lose(peer, f"connection failed ({exc.strerror or exc})")
                return
            peer.wrote_at = time.monotonic()
            peer.out_bytes -= n
            if n == len(peer.out[0]):
                peer.out.popleft()
            else:
                peer.out[0] = peer.out[0][n:]
        self._events(peer)

    def flush(self, timeout_s: float) -> None:
        """Write the replies still waiting, for at most `timeout_s` (then give up on them)."""
        deadline = time.monotonic() + timeout_s
        while any(p.out for p in self.peers) and time.monotonic() < deadline:
            for key, mask in self.sel.select(min(0.1, max(deadline - time.monotonic(), 0))):
                if key.data is not None and key.data in self.peers and mask & selectors.EVENT_WRITE:
                    self._write(key.data)

    # -- losing clients ------------------------------------------------------------------
    def _check_stalls(self, now: float) -> None:
        limit = self.stall_timeout_s
        for peer in list(self.peers):
            if peer.stage == "closing":
                if now > peer.close_at:
                    self._close(peer)
            elif peer.out and now - peer.wrote_at > limit:
                self._lose(peer, f"read no reply for {limit:g} s", keep_replies=False)
            elif peer.rank is None and now - peer.read_at > limit:
                self.refused += 1
                self._close(peer)  # connected, never said who it is
            elif peer.rank is not None and peer.mid_request() and now - peer.read_at > limit:
                what = ("the payload its header announced" if peer.stage in ("body", "skip")
                        else "the rest of a request header")
                self._lose(peer, f"sent no byte of {what} for {limit:g} s")
        if now - self.started > limit:  # a client that never connected
            for rank in sorted(self.expected - set(self.by_rank)):
                self.expected.discard(rank)
                self.on_lost(rank, f"never connected within {limit:g} s")

    def drop(self, rank: int, why: str) -> None:
        """Stop serving `rank`: its stream is closed once its last replies (an error saying
        why) are written (the server's on_lost is told)."""
        peer = self.by_rank.get(rank)
        if peer is not None and peer in self.peers and peer.stage != "closing":
            self._lose(peer, why)

    def _lose(self, peer: Peer, why: str, keep_replies: bool = True) -> None:
        """The client is gone or dropped: tell the server, then close its stream (after
        LINGER_S at most, to deliver what is queued, unless it reads nothing anyway)."""
        if peer.stage == "closing":
            self._close(peer)
            return
        peer.stage, peer.close_at = "closing", time.monotonic() + LINGER_S
        if not keep_replies:
            peer.out.clear()
            peer.out_bytes = 0
        if peer.rank is not None:
            self.on_lost(peer.rank, why)
        if peer in self.peers:
            self._events(peer)

    def _close(self, peer: Peer) -> None:
        if peer not in self.peers:
            return
        self.peers.discard(peer)
        if peer.events:
            self.sel.unregister(peer.sock)
            peer.events = 0
        try:
            peer.sock.close()
        except OSError:
            pass
        peer.out.clear()

    def close(self) -> None:
        for peer in list(self.peers):
            self._close(peer)
        self.sel.close()
        self.listener.close()
