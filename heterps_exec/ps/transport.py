"""The parameter server's own connections: one TCP stream per (client, PS rank).

Why not gloo point-to-point, which the PS used before: a gloo receive must be posted with its
size before the message arrives, and a message longer than the receive aborts the receiving
process inside gloo (an uncatchable C++ abort: one bad client killed the PS), a wait that times
out closes the peer's connection, and a header announcing a payload that never came blocked
the server's one receive-from-any for every client. On a stream the server reads a fixed-size
header first, checks every size in it before allocating anything (protocol.check_header), and
reads each connection as its bytes arrive (selectors): a client that stops mid-message or stops
reading its replies stalls only itself, and after the server's own `stall_timeout_s` it is
dropped - its connection closed, its steps no longer awaited - while the others are served.

    host, port = listen_address()                # where this PS rank listens (loopback alone)
    addresses = exchange(group, (host, port))    # collective over the PS group: every rank
    conn = Connection(addresses[ps_rank], my_rank, timeout_s=120)   # a client's stream
    conn.send([head, payload]); status, value, payload = conn.reply(tag)

The addresses travel once over the PS process group (torch.distributed, all_gather_object);
everything after is this module's. The PS listens where the run listens (HETERPS_BIND_HOST:
127.0.0.1 on one machine, so nothing is reachable from elsewhere; --bind-addr across several).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading

import numpy as np

from heterps_exec.ps import protocol
from heterps_exec.ps.protocol import REPLY_BYTES, PSError

BIND_HOST = "HETERPS_BIND_HOST"
"""The launcher's choice of listening address (heterps_exec.launch.proctree.BIND_HOST)."""
BACKLOG = 1024
RECV_CHUNK = 4 << 20
"""Largest single read from a socket."""


def _route_to(host: str) -> str | None:
    """This machine's address on the route to `host` (a UDP connect sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return s.getsockname()[0]
    except OSError:
        return None


def listen_address() -> str:
    """The address this PS rank listens on: the run's bind host when the launcher set one;
    else, with a rendezvous on another machine, this machine's address towards it; else the
    loopback address."""
    chosen = os.environ.get(BIND_HOST, "")
    if chosen:
        return chosen
    master = os.environ.get("MASTER_ADDR", "")
    try:
        remote = bool(master) and not ipaddress.ip_address(
            socket.gethostbyname(master)).is_loopback
    except (OSError, ValueError):
        remote = False
    return (_route_to(master) if remote else None) or "127.0.0.1"


def listen(host: str) -> socket.socket:
    """A listening, non-blocking socket on `host` and a free port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


def exchange(group, mine: tuple[str, int] | None) -> list:
    """Collective over `group`: every member's address (None for clients), by group rank."""
    import torch.distributed as dist
    out: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, mine, group=group)
    return out


def tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # requests are small and waited on


def recv_exact(sock: socket.socket, view: memoryview) -> None:
    """Fill `view` from a blocking socket (EOF: ConnectionError)."""
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:], min(len(view) - got, RECV_CHUNK))
        if n == 0:
            raise ConnectionError("the peer closed the connection")
        got += n


class Connection:
    """A client's stream to one PS rank. Requests go out whole (`send`); replies come back in
    the order the server sends them, each naming its request's tag, so `reply(tag)` reads and
    keeps others' replies until its own arrives (several requests may be in flight)."""

    def __init__(self, address: tuple[str, int], rank: int, *, server: int,
                 timeout_s: float):
        self.server, self.timeout_s = server, timeout_s
        try:
            self.sock = socket.create_connection(tuple(address), timeout=timeout_s)
        except OSError as exc:
            raise PSError(f"PS rank {server}: cannot connect to {address[0]}:{address[1]} "
                          f"({exc.strerror or exc})") from None
        tune(self.sock)
        self.send_lock, self.recv_lock = threading.Lock(), threading.Lock()
        self.kept: dict[int, tuple[int, int, bytes]] = {}  # tag -> a reply read early
        self.send([protocol.hello(rank)])

    def _failed(self, exc: BaseException, doing: str) -> PSError:
        if isinstance(exc, TimeoutError):
            return PSError(f"PS rank {self.server}: no reply within {self.timeout_s:g} s "
                           f"while {doing}")
        return PSError(f"PS rank {self.server}: connection lost while {doing} "
                       f"({type(exc).__name__}: {exc}); the server may have dropped this "
                       "client")

    def send(self, parts: list) -> None:
        """Write the parts (bytes or buffers) of one request, in order, whole."""
        try:
            with self.send_lock:
                for part in parts:
                    self.sock.sendall(part)
        except OSError as exc:
            raise self._failed(exc, "sending a request") from None

    def reply(self, tag: int) -> tuple[int, int, np.ndarray]:
        """(status, value, payload bytes) of the reply on `tag`."""
        try:
            with self.recv_lock:
                while tag not in self.kept:
                    head = bytearray(REPLY_BYTES)
                    recv_exact(self.sock, memoryview(head))
                    status, nbytes, value, got = np.frombuffer(head, np.int64).tolist()
                    if not 0 <= nbytes <= protocol.MAX_REPLY_BYTES + protocol.MAX_TEXT_BYTES:
                        raise ConnectionError(f"a reply announcing {nbytes} bytes")
                    payload = np.empty(nbytes, np.uint8)
                    recv_exact(self.sock, memoryview(payload))
                    self.kept[got] = (status, value, payload)
                return self.kept.pop(tag)
        except (OSError, ConnectionError) as exc:
            raise self._failed(exc, f"waiting for the reply on tag {tag}") from None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

