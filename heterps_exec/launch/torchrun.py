"""Start torchrun for a prepared RunSpec and wait for it: every process of the run stops with it.

    outcome = launch(spec, LaunchOptions(max_restarts=1))      # runs torchrun, waits
    outcome.returncode, outcome.timed_out, outcome.tail()       # torchrun.log's last lines

torchrun does the process management: a c10d rendezvous on 127.0.0.1 on one machine,
a c10d rendezvous endpoint for several (`--nnodes`, `--node-rank`, `--rdzv-endpoint`),
`--max-restarts` after a failure. Every process of the run stops with the launcher
(heterps_exec.launch.proctree): at the end, on Ctrl-C or SIGTERM, at the timeout (so a hung
rank fails the run instead of hanging it) and, through the kernel's parent-death signal, when
the launcher itself is killed. On one machine every listening socket of the run is on
127.0.0.1; across machines, on the address each node was given
(heterps_exec.launch.bind_addr).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from heterps_exec.launch import proctree
from heterps_exec.request import ExecError
from heterps_exec.runtime.layout import RunSpec
from heterps_sim.util import progress

LOG = "torchrun.log"
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchOptions:
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str = ""
    rdzv_id: str = "heterps"
    bind_addr: str = ""
    """Multi-node: the address this node's stores and gloo listen on (heterps_exec.launch.bind_addr);
    "" leaves it to torch (every interface)."""
    max_restarts: int = 0
    timeout_s: float = 600.0
    """Whole-run wall-clock limit (all attempts)."""


def torchrun_command(spec: RunSpec, opts: LaunchOptions) -> list[str]:
    world = spec.layout().world_size + spec.ps_shards
    if world % opts.nnodes:
        raise ExecError(f"--nnodes {opts.nnodes}: the run's {world} ranks (PS included) do not "
                        "split evenly over the nodes")
    # torchrun through proctree: tied to this launcher, its stores bound to bind_host(opts)
    cmd = [sys.executable, "-m", "heterps_exec.launch.proctree", "torchrun",
           f"--max-restarts={opts.max_restarts}", "--monitor-interval=0.2", f"--nproc-per-node={world // opts.nnodes}"]
    if opts.nnodes == 1:  # --standalone's rendezvous, on the loopback address only
        cmd += ["--nnodes=1", "--rdzv-backend=c10d", f"--rdzv-endpoint={LOOPBACK}:0",
                f"--rdzv-id={uuid.uuid4().hex}", f"--local-addr={LOOPBACK}"]
    else:
        cmd += [f"--nnodes={opts.nnodes}", f"--node-rank={opts.node_rank}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint={opts.rdzv_endpoint}",
                f"--rdzv-id={opts.rdzv_id}"]
        if opts.bind_addr:  # this node's address, as the other nodes reach it
            cmd += [f"--local-addr={opts.bind_addr}"]
    return cmd + ["-m", "heterps_exec.launch.proctree", "rank", "heterps_exec.runtime.worker",
                  str(Path(spec.out_dir) / "spec.json")]


def bind_host(opts: LaunchOptions) -> str:
    """Where the run's stores listen: loopback on one machine; across several, the address
    chosen for this node (--bind-addr or a local rendezvous host), else "" (torch's own
    choice, every interface of the node that hosts them)."""
    return LOOPBACK if opts.nnodes == 1 else opts.bind_addr


class RunFailed(RuntimeError):
    """The ranks ran and failed (or timed out); the message holds the log's last lines (or
    names the log). Not bad input: the commands exit 1 on it, after one message."""


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    returncode: int
    wall_s: float
    log: Path
    timed_out: bool = False

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def launch(spec: RunSpec, opts: LaunchOptions = LaunchOptions(), *,
           keep_fds: tuple[int, ...] = ()) -> LaunchOutcome:
    """Run torchrun and wait (bounded); its output goes to the run folder's torchrun.log.

    Nothing of the run outlives this call: on return, an exception, Ctrl-C, SIGTERM or the
    timeout, every process of the run (torchrun, ranks, PS ranks) is stopped (proctree).
    `keep_fds` (e.g. the checkpoint directory's lock) stay open in torchrun while it lives."""
    log = Path(spec.out_dir) / (LOG if opts.nnodes == 1 else f"torchrun.node{opts.node_rank}.log")
    token = proctree.new_token()
    env = {**os.environ, "OMP_NUM_THREADS": str(spec.threads_per_rank),
           "PYTHONUNBUFFERED": "1", proctree.RUN_TOKEN: token,
           proctree.PARENT_PID: str(os.getpid())}
    if opts.nnodes == 1:  # stores on 127.0.0.1; gloo's pairs listen on the interface named
        env[proctree.BIND_HOST] = bind_host(opts)
        env["GLOO_SOCKET_IFNAME"] = proctree.loopback_interface()
    elif opts.bind_addr:  # several nodes: the address this node was given, and its interface
        from heterps_exec.launch.bind_addr import interface_of
        env[proctree.BIND_HOST] = opts.bind_addr
        env["GLOO_SOCKET_IFNAME"] = interface_of(opts.bind_addr) or ""
    t0 = time.perf_counter()
    world = spec.layout().world_size + spec.ps_shards  # trainers (mixed stages too) + PS ranks
    progress.phase(f"heterps-exec: launching torchrun ({world} ranks) and waiting for them to "
                   f"run {spec.steps} steps (log: {log})")
    with open(log, "w") as fh, proctree.sigterm_as_interrupt():
        proc = None
        try:
            proc = subprocess.Popen(torchrun_command(spec, opts), stdout=fh,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    pass_fds=keep_fds)
            try:
                rc = proc.wait(timeout=opts.timeout_s)
                return LaunchOutcome(rc, time.perf_counter() - t0, log)
            except subprocess.TimeoutExpired:
                proctree.stop_tree(token, proc, grace_s=0.0)
                return LaunchOutcome(-9, time.perf_counter() - t0, log, timed_out=True)
        finally:
            proctree.stop_tree(token, proc)
