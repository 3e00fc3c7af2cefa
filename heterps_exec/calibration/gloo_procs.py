"""Small gloo process groups on this host, for the link and CPU measurements
(calibration/links.py, calibration/gloo_cpu.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def init_gloo(rank: int, world: int, store_path: str) -> None:
    """Join the group as a rank of the engine does: one torch thread, gloo, a file store."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank,
                            world_size=world)


def spawn(target, world: int, args: tuple, results: int) -> list:
    """Run `target(rank, world, store, *args, queue)` on `world` processes; return the first
    `results` items they put on the queue."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        store = str(Path(d) / "store")
        procs = [ctx.Process(target=target, args=(r, world, store, *args, queue))
                 for r in range(world)]
        for p in procs:
            p.start()
        items = [queue.get(timeout=300) for _ in range(results)]
        for p in procs:
            p.join(timeout=60)
    return items
