"""What a gloo message costs the sender's and the receiver's CPU on this host.

Two processes over loopback, each timing its own process CPU (every thread, gloo's
included) over a round of `messages` messages of one size: rank 0 isends them one at a time,
each after an idle pause (`pace_s`, a rank computing between messages; the pauses' own CPU is
measured apart and taken out), rank 1 has posted the matching irecvs (allocating each
buffer, as the engine's receives do) and waits for them. A rank blocked in wait() uses no
CPU (gloo's transport thread sleeps in epoll), so the figure is the work of moving the
messages, Python calls included. Per size the median over rounds; then a least-squares line
seconds = a + b x bytes for each side: the links file's `message_cpu`, which the simulator's
`cores` effect charges (des/work.py).

`heterps-exec profile` runs it with the links (calibration/links.py);
benchmarks/bench_message_cpu.py prints it in full.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

from heterps_exec.calibration.gloo_procs import init_gloo, spawn

SIZES = (256, 4096, 9920, 32768, 131072, 524288)
"""Bytes per message: exec-tiny's boundaries lie between (a 32-sample microbatch at the cut
after `concat` carries 9,920 bytes each way)."""


def _sides(rank: int, world: int, store_path: str, sizes: list[int], messages: int,
           repeats: int, pace_s: float, queue) -> None:
    init_gloo(rank, world, store_path)
    idle = 0.0
    if pace_s > 0 and rank == 0:  # the sender's pauses alone: their CPU is taken out
        t0 = time.process_time()
        for _ in range(messages):
            time.sleep(pace_s)
        idle = (time.process_time() - t0) / messages
    results = {}
    for size in sizes:
        n = max(size // 4, 1)
        src = torch.randn(n)
        per_round = []
        for r in range(repeats + 1):  # the first round warms gloo's pairs up: dropped
            dist.barrier()
            t0 = time.process_time()
            if rank == 0:
                for i in range(messages):
                    if pace_s > 0:
                        time.sleep(pace_s)
                    dist.isend(src, dst=1, tag=i).wait()
            else:
                works = [dist.irecv(torch.empty(n), src=0, tag=i) for i in range(messages)]
                for w in works:
                    w.wait()
            if r:
                per_round.append((time.process_time() - t0) / messages - idle)
        results[size] = per_round
    queue.put((rank, results))
    dist.barrier()
    dist.destroy_process_group()


def profile_message_cpu(sizes=SIZES, messages: int = 200, repeats: int = 5,
                        pace_s: float = 0.001) -> dict:
    """{"message_cpu": MessageCpu's fields (each side's line, clipped at 0), "points": per
    size, the median CPU per message on each side and the rounds' spread}."""
    got = dict(spawn(_sides, 2, (list(sizes), messages, repeats, pace_s), 2))
    points, fit = [], {}
    for rank, side in ((0, "send"), (1, "recv")):
        medians = [statistics.median(got[rank][s]) for s in sizes]
        b, a = np.polyfit(np.array(sizes, float), np.array(medians), 1)
        fit[side] = (max(float(a), 0.0), max(float(b), 0.0))
    for s in sizes:
        points.append({"bytes": s, **{f"{side}_s": statistics.median(got[rank][s])
                                      for rank, side in ((0, "send"), (1, "recv"))},
                       **{f"{side}_spread_s": [min(got[rank][s]), max(got[rank][s])]
                          for rank, side in ((0, "send"), (1, "recv"))}})
    return {"message_cpu": {"send_s": fit["send"][0], "send_s_per_byte": fit["send"][1],
                            "recv_s": fit["recv"][0], "recv_s_per_byte": fit["recv"][1]},
            "points": points}
