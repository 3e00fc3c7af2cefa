"""A PS world on this machine: spawn PS ranks and client ranks, run a function on the clients.

Used by `ps-bench`, the benchmarks and the tests; the engine launches its own world (torchrun)
and calls `serve` / `PSClient` directly. Ranks 0..S-1 serve shards, ranks S.. are clients;
the PS group is a `new_group` over all of them (in the engine it also spans only PS ranks and
the trainer ranks that use it). Every process runs with one torch thread, and a world that
does not finish within `timeout_s` is killed: a hung rank fails a caller, never hangs it.
"""

from __future__ import annotations

import datetime
import os
import queue as queue_mod
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from heterps_exec.launch.proctree import loopback_interface


def _entry(rank, world, init_file, num_servers, config_kw, client_kw, restore, fn, args,
           results, server_kw, group_timeout_s):
    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback_interface())  # listen on loopback only
    if os.environ.get("HETERPS_PS_DEBUG"):  # stacks of a hung rank, for debugging
        import faulthandler
        faulthandler.dump_traceback_later(
            float(os.environ["HETERPS_PS_DEBUG"]), file=open(f"/tmp/heterps-ps-{rank}.txt", "w"))
    from heterps_exec.ps.client import PSClient
    from heterps_exec.ps.server import serve
    from heterps_exec.ps.spec import ShardConfig

    try:
        timeout = {} if group_timeout_s is None else {
            "timeout": datetime.timedelta(seconds=group_timeout_s)}
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                world_size=world, **timeout)
        group = dist.new_group(list(range(world)))
        servers, clients = list(range(num_servers)), list(range(num_servers, world))
        if rank < num_servers:
            cfg = ShardConfig(shard=rank, num_shards=num_servers, **config_kw)
            results.put((rank, "ok", serve(group, clients, cfg, restore_dir=restore[0],
                                           restore_step=restore[1], **server_kw)))
        else:
            client = PSClient(group, servers, **client_kw)
            out = fn(client, rank - num_servers, *args)
            client.close()
            results.put((rank, "ok", out))
        dist.destroy_process_group()
    except BaseException:  # report, then die: the parent turns it into an exception
        results.put((rank, "error", traceback.format_exc()))


class LocalWorld:
    """Running PS + client processes; `join()` -> {rank: result}."""

    def __init__(self, fn, args=(), *, num_servers=1, num_clients=1, config=None,
                 restore_dir=None, restore_step=None, work_dir=None, client_options=None,
                 server_options=None, group_timeout_s=None):
        ctx = mp.get_context("spawn")
        self._tmp = tempfile.TemporaryDirectory(prefix="heterps-ps-")
        config = dict(config or {})
        config.setdefault("work_dir", work_dir or os.path.join(self._tmp.name, "live"))
        init_file = os.path.join(self._tmp.name, "init")
        self.world = num_servers + num_clients
        self.results = ctx.Queue()
        self.procs = [ctx.Process(target=_entry, daemon=True, args=(
            r, self.world, init_file, num_servers, config, dict(client_options or {}),
            (restore_dir, restore_step), fn, args, self.results, dict(server_options or {}),
            group_timeout_s))
            for r in range(self.world)]
        for p in self.procs:
            p.start()

    def kill(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(5)

    def join(self, timeout_s: float = 90.0) -> dict:
        out, deadline = {}, time.monotonic() + timeout_s
        try:
            while len(out) < self.world:
                left = deadline - time.monotonic()
                try:
                    rank, status, value = self.results.get(timeout=max(left, 0.01))
                except queue_mod.Empty:
                    raise TimeoutError(f"PS world did not finish in {timeout_s:.0f} s "
                                       f"(finished ranks: {sorted(out)})") from None
                if status == "error":
                    raise RuntimeError(f"rank {rank} failed:\n{value}")
                out[rank] = value
        finally:
            self.kill()
            self._tmp.cleanup()
        return out


def run_local(fn, args=(), *, num_servers=1, num_clients=1, config=None, restore_dir=None,
              restore_step=None, timeout_s=90.0, client_options=None,
              server_options=None, group_timeout_s=None) -> list:
    """Results of `fn(client, client_index, *args)` on each client, in client order
    (`client_options`: keyword arguments of every `PSClient`, e.g. quantize;
    `server_options`: of every `serve`, e.g. checkpoint_dir, stall_timeout_s;
    `group_timeout_s`: the process group's timeout, torch's default when None)."""
    world = LocalWorld(fn, args, num_servers=num_servers, num_clients=num_clients,
                       config=config, restore_dir=restore_dir, restore_step=restore_step,
                       client_options=client_options, server_options=server_options,
                       group_timeout_s=group_timeout_s)
    out = world.join(timeout_s)
    return [out[r] for r in range(num_servers, num_servers + num_clients)]
