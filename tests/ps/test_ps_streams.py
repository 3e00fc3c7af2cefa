"""The PS's stream layer (heterps_exec/ps/streams.py) on real sockets, in one process, fast:
sizes are checked before anything is allocated, a client that breaks its stream or stalls is
dropped by the server's own timeout, and only it - the others are served meanwhile.

The server side is `Streams` polled on a thread, answering each request with an echo (or an
error naming its header's problem); clients are raw sockets speaking protocol.py's frames.
The same behaviour through real PS ranks is tests/ps/test_ps_fuzz.py (slow here)."""

from __future__ import annotations

import queue
import socket
import threading
import time

import numpy as np
import pytest

from heterps_exec.ps import protocol, streams, transport
from heterps_exec.ps.protocol import OK, PULL, PUSH, STATS

STALL_S = 0.5
WAIT_S = 20.0


def frame(op, *, nbytes=0, tag=7, expect=0, n=0, width=0, val_code=4) -> bytes:
    h = [op, 0, n, 0, 2, val_code, width, nbytes, tag, expect, 0, 0]
    return np.asarray(h, np.int64).tobytes() + protocol.trailer(h).tobytes()


class Server:
    """Streams on a thread: replies OK with `expect` zero bytes, or an error naming the
    problem; records every loss."""

    def __init__(self, ranks=(1, 2), stall_timeout_s=STALL_S):
        self.listener = transport.listen("127.0.0.1")
        self.address = self.listener.getsockname()[:2]
        self.lost: queue.Queue = queue.Queue()
        self.requests: list = []
        self.stop = threading.Event()
        self.streams = streams.Streams(self.listener, ranks, stall_timeout_s, self.on_request,
                                       lambda rank, why: self.lost.put((rank, why)))
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def on_request(self, rank, header, body, problem):
        self.requests.append((rank, header[0], None if body is None else len(body), problem))
        if problem is not None:
            text = problem.encode()
            self.streams.send(rank, [protocol.reply_head(1, len(text), 0, header[8]), text])
        elif 0 < header[8] < protocol.TAG_LIMIT:
            size = header[9]
            self.streams.send(rank, [protocol.reply_head(OK, size, 0, header[8]),
                                     np.zeros(size, np.uint8)])

    def run(self):
        while not self.stop.is_set():
            self.streams.poll(0.05)
        self.streams.close()

    def lost_within(self, seconds=WAIT_S) -> dict:
        out, deadline = {}, time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                rank, why = self.lost.get(timeout=0.1)
                out[rank] = why
                return out
            except queue.Empty:
                continue
        return out

    def close(self):
        self.stop.set()
        self.thread.join(5)


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def client(server: Server, rank: int) -> socket.socket:
    sock = socket.create_connection(server.address, timeout=WAIT_S)
    sock.sendall(protocol.hello(rank))
    return sock


def reply(sock) -> tuple[int, int, bytes]:
    head = bytearray(protocol.REPLY_BYTES)
    transport.recv_exact(sock, memoryview(head))
    status, nbytes, _, tag = np.frombuffer(head, np.int64).tolist()
    payload = bytearray(nbytes)
    transport.recv_exact(sock, memoryview(payload))
    return status, tag, bytes(payload)


def served(sock, tag=11) -> bool:
    sock.sendall(frame(STATS, tag=tag, expect=3))
    status, got, payload = reply(sock)
    return status == OK and got == tag and payload == bytes(3)


def closed(sock) -> bool:
    """Whether the server has closed the stream (EOF or a reset within WAIT_S)."""
    try:
        while True:
            if not sock.recv(1 << 20):
                return True
    except (ConnectionError, TimeoutError):
        return True
    except OSError:
        return True


def test_a_bad_header_within_the_bounds_is_answered_and_the_stream_stays_in_step(server):
    sock = client(server, 1)
    sock.sendall(frame(PULL, nbytes=12, n=1, tag=5) + b"x" * 12)  # 12 bytes do not hold 1 id
    status, tag, text = reply(sock)
    assert status != OK and tag == 5 and b"does not hold 1 ids" in text
    assert served(sock)  # the 12 bytes were read and skipped: the next header is a header
    assert ("ids" in server.requests[0][3]) and server.requests[0][2] is None
    assert server.lost.empty()


def test_an_oversize_payload_is_refused_before_allocating_and_only_its_client_dropped(server):
    bad, good = client(server, 1), client(server, 2)
    assert served(good)
    bad.sendall(frame(PUSH, nbytes=1 << 40, n=1, tag=9))
    status, tag, text = reply(bad)
    assert status != OK and tag == 9 and b"exceeds the limit" in text
    try:
        bad.sendall(b"\0" * (16 << 20))  # whatever follows is read and thrown away
    except OSError:
        pass
    assert "cannot be read or skipped" in server.lost_within()[1]
    assert closed(bad)
    assert served(good)
    peers = [p for p in server.streams.peers if p.rank == 2]
    assert len(peers) == 1 and len(peers[0].buffer) == protocol.REQUEST_FRAME


@pytest.mark.parametrize("garbage", [bytes(range(256)) * (1 << 18),  # 64 MiB, no request
                                     frame(STATS)[:96] + bytes(16)],  # a header, no trailer
                         ids=["64 MiB of bytes", "a header without its trailer"])
def test_bytes_that_are_not_a_request_drop_their_client(server, garbage):
    bad, good = client(server, 1), client(server, 2)
    try:
        bad.sendall(garbage)
    except OSError:
        pass  # the server closed the stream while the rest was still going out
    assert "not a PSClient request" in server.lost_within()[1]
    assert served(good)


@pytest.mark.parametrize("stall, reason", [
    (frame(PULL, nbytes=1 << 20, n=1 << 17, tag=3), "payload its header announced"),
    (frame(STATS)[:40], "rest of a request header")], ids=["no payload", "half a header"])
def test_a_client_stalled_mid_request_is_dropped_and_the_others_are_served_meanwhile(
        server, stall, reason):
    bad, good = client(server, 1), client(server, 2)
    bad.sendall(stall)
    assert served(good) and served(good, tag=12)  # not held up by the stalled stream
    assert reason in server.lost_within()[1]
    assert served(good, tag=13)


def test_a_client_that_reads_no_reply_is_dropped(server):
    bad, good = client(server, 1), client(server, 2)
    for tag in range(1, 201):  # 200 requests whose 256 KiB replies it never reads
        bad.sendall(frame(STATS, tag=tag, expect=1 << 18))
    assert "read no reply" in server.lost_within()[1]
    assert served(good)


def test_unknown_ranks_and_bad_hellos_are_refused(server):
    for hello in (protocol.hello(99), b"\0" * protocol.HELLO_BYTES):
        sock = socket.create_connection(server.address, timeout=WAIT_S)
        sock.sendall(hello)
        assert closed(sock)
    first = client(server, 1)
    second = client(server, 1)  # the same rank twice
    assert closed(second)
    assert served(first)
    assert server.streams.refused == 3
