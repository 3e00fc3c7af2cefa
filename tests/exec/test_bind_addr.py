"""Multi-node runs listen on the address they are given (--bind-addr, or a rendezvous host of
this machine), checked before launch; two nodes on one machine bound to 127.0.0.1 have no
listener beyond loopback (read from /proc/net/tcp{,6} while they train)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import pytest

from heterps_exec.cli import main
from heterps_exec.launch.bind_addr import bind_problem, chosen_bind_addr, interface_of
from heterps_exec.launch.torchrun import LaunchOptions, bind_host
from tests.exec.helpers import SCENARIO, tiny_plan
from tests.exec.procs import (
    is_loopback,
    listening,
    run_pids,
    seconds_until_gone,
    wait_for,
    worker_pids,
)

PLAN = "no-such-plan.json"  # never read: the flags fail first


def _loopback_name() -> str:
    return next(name for _, name in socket.if_nameindex() if name.startswith("lo"))


def test_loopback_addresses_belong_to_the_loopback_interface():
    assert interface_of("127.0.0.1") == _loopback_name()
    assert interface_of("192.0.2.77") is None  # TEST-NET-1: no machine here has it
    assert bind_problem("127.0.0.1") is None


def test_the_bind_address_is_the_one_named_else_a_local_rendezvous_host():
    assert chosen_bind_addr("", 1, "") == ""  # one machine: loopback, set by the launcher
    assert chosen_bind_addr("127.0.0.1", 2, "192.0.2.77:29400") == "127.0.0.1"
    assert chosen_bind_addr("[::1]", 2, "192.0.2.77:29400") == "::1"
    assert chosen_bind_addr("", 2, "127.0.0.1:29400") == "127.0.0.1"  # this machine hosts it
    assert chosen_bind_addr("", 2, "192.0.2.77:29400") == ""  # another machine's: unknown
    assert bind_host(LaunchOptions(nnodes=2, bind_addr="127.0.0.1")) == "127.0.0.1"
    assert bind_host(LaunchOptions(nnodes=1, bind_addr="")) == "127.0.0.1"


@pytest.mark.parametrize("address, words", [
    ("192.0.2.77", "is not an address of this machine"),
    ("not-an-ip", "expected an IP address of this machine"),
    ("0.0.0.0", "means every interface"),
    ("::", "means every interface"),
])
def test_a_bad_bind_address_is_one_line_and_exit_2(capsys, address, words):
    code = main(["run", PLAN, "--scenario", SCENARIO, "--nnodes", "2", "--node-rank", "0",
                 "--rdzv-endpoint", "127.0.0.1:29400", "--bind-addr", address])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("heterps-exec run: --bind-addr: ") and words in err, err


def test_bind_addr_on_one_machine_is_refused(capsys):
    code = main(["run", PLAN, "--scenario", SCENARIO, "--bind-addr", "127.0.0.1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("heterps-exec run: --bind-addr: only with --nnodes > 1")


@pytest.mark.slow  # two nodes' torchruns and ranks starting on two cores: ~30-60 s here
@pytest.mark.timeout(240)
def test_two_nodes_bound_to_loopback_listen_on_loopback_only(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1])
    nodes = []
    for n in (0, 1):
        err = open(tmp_path / f"node{n}.err", "w")  # noqa: SIM115 (closed with the process)
        nodes.append(subprocess.Popen(
            [sys.executable, "-m", "heterps_exec.cli", "run", str(plan), "--scenario", SCENARIO,
             "--steps", "1000000", "--num-samples", "1024", "--nnodes", "2", "--node-rank",
             str(n), "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "bind-test",
             "--bind-addr", "127.0.0.1", "--out", str(tmp_path / f"node{n}")],
            stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path))
    try:
        folders = [tmp_path / f"node{n}" for n in (0, 1)]
        ranks = wait_for(lambda: all(len(worker_pids(f)) == 1 for f in folders)
                         and [p for f in folders for p in worker_pids(f)], 150, "both ranks")
        wait_for(lambda: all(listening(p) for p in ranks), 60, "both ranks to listen (gloo)")
        sockets = {pid: listening(pid) for f in folders for pid in run_pids(str(f))}
        stores = [p for p in sockets if p not in ranks and sockets[p]]
        assert stores, sockets  # one node's torchrun hosts the rendezvous store
        addresses = [a for found in sockets.values() for a in found]
        assert len(addresses) >= 3, sockets
        assert all(a.startswith("127.0.0.1:") for a in addresses), sockets
        assert all(is_loopback(a) for a in addresses), sockets
    finally:
        for proc in nodes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in nodes:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    seconds_until_gone(str(tmp_path), 10.0)
