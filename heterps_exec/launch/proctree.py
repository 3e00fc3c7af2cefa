"""A run's processes stop as one: the launcher, torchrun, every rank (PS ranks included).

Three mechanisms, each covering what the others cannot:

- Every process of a run carries `HETERPS_RUN_TOKEN=<token>` in its environment (children
  inherit it, also when torchrun restarts ranks or they are re-parented after a crash), so
  `stop_tree` finds them all by reading /proc/PID/environ, sends SIGTERM, and SIGKILL to what
  is still there after a short grace. The launcher calls it on every way out of a run: the
  end, an exception, Ctrl-C, SIGTERM, `--timeout`.
- `tie_to_parent`: each process asks the kernel for a signal when its parent dies
  (PR_SET_PDEATHSIG), so a launcher killed with SIGKILL, which runs no code, still takes
  torchrun with it, and torchrun's death takes the ranks. A process whose parent died before
  it could ask exits at once.
- `python -m heterps_exec.launch.proctree torchrun ARGS` is torchrun tied to the launcher, with its
  rendezvous stores listening only on `HETERPS_BIND_HOST` (127.0.0.1 for a single machine):
  torch's TCPStore listens on every interface unless it is handed a socket bound elsewhere;
  `... proctree rank heterps_exec.runtime.worker SPEC` is a rank tied to torchrun.

Linux only (prctl, /proc), like the engine's launch.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
import uuid

RUN_TOKEN = "HETERPS_RUN_TOKEN"
"""Environment variable naming the run a process belongs to."""
PARENT_PID = "HETERPS_PARENT_PID"
"""Environment variable: the pid a process must be the child of (its launcher)."""
BIND_HOST = "HETERPS_BIND_HOST"
"""Environment variable: the address torchrun's stores listen on."""
PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM reached the launcher: handled like Ctrl-C (the run is stopped, exit 130)."""


def new_token() -> str:
    return f"{os.getpid()}-{uuid.uuid4().hex}"


def _pdeathsig(sig: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def tie_to_parent(sig: int = signal.SIGKILL) -> None:
    """Die by `sig` when the parent named in HETERPS_PARENT_PID dies (exit now if it already
    has), then name this process the parent its own children must outlive. A process not
    started by a heterps launcher (no HETERPS_PARENT_PID) is left alone."""
    want = os.environ.get(PARENT_PID)
    if not want:
        return
    _pdeathsig(sig)
    if os.getppid() != int(want):  # the parent died before the request was in place
        os._exit(128 + int(sig))
    os.environ[PARENT_PID] = str(os.getpid())


def tree_pids(token: str) -> list[int]:
    """Live processes (not zombies) whose environment carries this run's token."""
    needle = f"{RUN_TOKEN}={token}\0".encode()
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read() + b"\0":
                    found.append(int(name))
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_tree(token: str, root=None, *, grace_s: float = 1.0, limit_s: float = 10.0) -> list[int]:
    """Stop every process of run `token`: SIGTERM, then SIGKILL after `grace_s`; `root` (a
    Popen, e.g. torchrun) is reaped. Returns the pids still alive after `limit_s` (none
    expected: SIGKILL cannot be ignored)."""
    t0 = time.monotonic()
    if root is not None and root.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            root.send_signal(signal.SIGTERM)
    sig, pids = signal.SIGTERM, tree_pids(token)
    _signal_all(pids, sig)
    while pids and time.monotonic() - t0 < limit_s:
        time.sleep(0.05)
        if root is not None:
            root.poll()  # reap it, so that it stops counting as alive
        pids = tree_pids(token)
        if sig == signal.SIGTERM and time.monotonic() - t0 >= grace_s:
            sig = signal.SIGKILL
            _signal_all(pids, sig)
            if root is not None and root.poll() is None:
                root.kill()
    if root is not None:
        with contextlib.suppress(Exception):
            root.wait(timeout=max(limit_s - (time.monotonic() - t0), 0.1))
    return pids


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Inside: SIGTERM raises `Terminated` (so the run's cleanup runs) instead of ending the
    process on the spot. Only the main thread can take signals; elsewhere a no-op."""
    def handler(signum, frame):
        raise Terminated()
    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def loopback_interface() -> str:
    """The loopback interface's name (for GLOO_SOCKET_IFNAME), normally "lo"."""
    for _, name in socket.if_nameindex():
        if name == "lo" or name.startswith("lo"):
            return name
    return "lo"


def _bound_stores(host: str) -> None:
    """Make every TCPStore server that this process creates listen on `host` only."""
    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend

    base = dist.TCPStore

    class BoundTCPStore(base):
        def __init__(self, host_name, port, world_size=None, is_master=False, *args, **kw):
            if is_master and kw.get("master_listen_fd") is None and len(args) < 4:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((host, int(port)))
                    sock.listen(4096)
                except OSError as exc:  # torch's callers expect a RuntimeError (port taken)
                    sock.close()
                    raise RuntimeError(f"cannot listen on {host}:{port}: {exc}") from None
                kw["master_listen_fd"] = sock.detach()  # the store owns the socket now
            super().__init__(host_name, port, world_size, is_master, *args, **kw)

    dist.TCPStore = BoundTCPStore
    c10d_rendezvous_backend.TCPStore = BoundTCPStore


def main(argv: list[str]) -> None:
    """`torchrun ARGS...`: torchrun tied to its launcher, its stores listening on
    HETERPS_BIND_HOST when given. `rank MODULE ARGS...`: a rank, tied to torchrun before it
    imports anything heavy (a rank still importing torch when torchrun dies must not stay)."""
    import runpy
    what, rest = argv[0], argv[1:]
    tie_to_parent(signal.SIGKILL)
    if what == "torchrun":
        host = os.environ.get(BIND_HOST)
        if host:
            _bound_stores(host)
        sys.argv = ["torchrun", *rest]
        runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
    elif what == "rank":
        sys.argv = list(rest)
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
    else:
        raise SystemExit(f"usage: python -m heterps_exec.launch.proctree torchrun|rank ARGS (got {what!r})")


if __name__ == "__main__":
    main(sys.argv[1:])
