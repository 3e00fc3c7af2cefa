"""A single-machine run listens on loopback only: torchrun's rendezvous stores, every trainer
rank and the PS rank (gloo's pairs). Read from /proc/net/tcp{,6} and each process's socket
inodes while a real run (2 trainers + 1 PS rank) trains; then Ctrl-C stops all of it."""

from __future__ import annotations

import signal

import pytest

from tests.exec.procs import (
    is_loopback,
    listening,
    run_pids,
    seconds_until_gone,
    start_run,
    wait_for,
    worker_pids,
)


@pytest.mark.slow  # ~30 s here; test_stop's Ctrl-C test checks the same without a PS rank
@pytest.mark.timeout(150)
def test_every_listening_socket_of_a_run_is_on_loopback(tmp_path):
    proc, run_dir = start_run(tmp_path, "--ps-shards", "1")
    try:
        ranks = wait_for(lambda: len(worker_pids(run_dir)) == 3 and worker_pids(run_dir), 90,
                         "2 trainers and a PS rank")
        # every rank has joined gloo (it listens) once training runs; torchrun hosts the stores
        wait_for(lambda: all(listening(p) for p in ranks), 60, "every rank to listen")
        sockets = {pid: listening(pid) for pid in run_pids(str(run_dir))}
        torchrun = [p for p in sockets if p not in ranks and p != proc.pid]
        assert torchrun and all(sockets[p] for p in torchrun), sockets  # its stores
        addresses = [a for found in sockets.values() for a in found]
        assert len(addresses) >= 5, sockets
        assert all(is_loopback(a) for a in addresses), sockets
        proc.send_signal(signal.SIGINT)
        seconds_until_gone(str(run_dir), 10.0)
        assert proc.wait(timeout=10) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
