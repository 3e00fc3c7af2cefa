"""This host's gloo links, timed the way the runtime uses them: after a step's compute.

    links = profile_links(max_ranks=6)   # latency_s, bytes_per_s, points, allreduce,
                                         # message_cpu (calibration/gloo_cpu.py), hot

A rank of a running plan calls the network right after it computed, and a rank that waits on
a peer blocks, so its CPU goes idle. On a VM, waking an idle virtual CPU costs the hypervisor
a round trip: here a 4-byte all-reduce right after 2 ms of compute takes about twice its
back-to-back time, and its mean far more (rare long wake-ups). So every figure the simulator
uses is measured *in situ*: each round, every rank first does `after_compute_s` of fixed
compute work (the same number of matrix products each round and on every rank, so the
ranks drift apart only as fast as real replicas do), then the message or all-reduce is
timed, and the MEAN over rounds (and over ranks for an all-reduce, as runtime/measure.py averages a
stage's replicas) is kept: a run's throughput is its mean step, long tails included.
    point-to-point: rank 0 computes, stamps time.perf_counter() (CLOCK_MONOTONIC, one clock
                    for every process of the host) into the message and sends; rank 1 sits in
                    recv and takes the difference on arrival: one-way time
    all-reduce:     k ranks compute, then all-reduce n bytes; k = 2..max_ranks
The back-to-back figures (barrier, then the call; the median) are kept under "hot" so the
difference shows. Fits: one-way time = latency + bytes / bandwidth (least squares).
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

from heterps_exec.calibration.gloo_cpu import profile_message_cpu
from heterps_exec.calibration.gloo_procs import init_gloo, spawn
from heterps_exec.calibration.profiler import fit_linear

P2P_SIZES = (64, 4096, 65536, 1 << 20, 4 << 20)
ALLREDUCE_SIZES = (4, 65536, 1 << 20, 4 << 20)
AFTER_COMPUTE_S = 0.002
"""Compute before each timed call: about one exec-tiny microbatch here."""


class FixedWork:
    """The same compute every call, sized once to take about `seconds` on this rank."""

    def __init__(self, seconds: float) -> None:
        self.a = torch.randn(128, 128)
        self.repeats = 0
        if seconds > 0:
            t0, n = time.perf_counter(), 50
            for _ in range(n):
                self.a @ self.a
            per = (time.perf_counter() - t0) / n
            self.repeats = max(1, round(seconds / max(per, 1e-9)))

    def __call__(self) -> None:
        for _ in range(self.repeats):
            self.a @ self.a


def _same_work(after_s: float) -> FixedWork:
    """Rank 0's sizing for every rank: the ranks then differ only by how fast they run, as
    replicas of one stage do (each sizing its own would add a steady skew)."""
    work = FixedWork(after_s)
    repeats = torch.tensor([work.repeats])
    dist.broadcast(repeats, 0)
    work.repeats = int(repeats.item())
    return work


def _one_way(rank: int, world: int, store_path: str, sizes: list[int], rounds: int, after_s: float,
             queue) -> None:
    init_gloo(rank, world, store_path)
    work = _same_work(after_s)
    results = []
    for size in sizes:
        buf = torch.zeros(max(size, 8), dtype=torch.uint8)
        stamp = buf[:8].view(torch.float64)
        times = []
        dist.barrier()
        for r in range(rounds + 3):
            if rank == 0:
                work()
                stamp[0] = time.perf_counter()
                dist.send(buf, 1)
            else:
                dist.recv(buf, 0)
                if r >= 3:
                    times.append(time.perf_counter() - float(stamp[0]))
        dist.barrier()  # rank 0 must not start the next size before rank 1 drained this one
        results.append((size, statistics.fmean(times) if times else 0.0))
    if rank == 1:
        queue.put(results)
    dist.destroy_process_group()


def _ping_pong(rank: int, world: int, store_path: str, sizes: list[int], rounds: int,
               queue) -> None:
    init_gloo(rank, world, store_path)
    results = []
    for size in sizes:
        buf = torch.zeros(max(size, 1), dtype=torch.uint8)
        times = []
        for r in range(rounds + 3):
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            if r >= 3:
                times.append((time.perf_counter() - t0) / 2)
        results.append((size, statistics.median(times)))
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def _all_reduces(rank: int, world: int, store_path: str, sizes: list[int], rounds: int,
                 after_s: float, queue) -> None:
    init_gloo(rank, world, store_path)
    work = _same_work(after_s)
    results = []
    for size in sizes:
        buf = torch.zeros(max(size // 4, 1), dtype=torch.float32)
        times, cpus = [], []
        for r in range(rounds + 3):
            if after_s > 0:
                work()
            else:
                dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            dist.all_reduce(buf)
            if r >= 3:
                times.append(time.perf_counter() - t0)
                # every thread of the member (gloo's moving the chunks included): what a ring
                # running beside compute takes from the host's cores (des/work.py)
                cpus.append(time.process_time() - c0)
        results.append((size, times, cpus))
    queue.put((rank, results))
    dist.destroy_process_group()


def _fit(points: list[tuple[int, float]]) -> dict:
    latency, per_byte = fit_linear([s for s, _ in points], [t for _, t in points])
    return {"latency_s": latency,
            "bytes_per_s": 1.0 / per_byte if per_byte > 0 else float("inf"),
            "points": [{"bytes": s, "one_way_s": t} for s, t in points]}


def profile_p2p(sizes=P2P_SIZES, rounds: int = 100, after_compute_s: float = AFTER_COMPUTE_S,
                ) -> dict:
    """One-way gloo loopback time per message size and its latency + bandwidth fit: in situ
    (mean, after compute) or, with after_compute_s=0, back to back (ping-pong median)."""
    if after_compute_s > 0:
        [points] = spawn(_one_way, 2, (list(sizes), rounds, after_compute_s), 1)
    else:
        [points] = spawn(_ping_pong, 2, (list(sizes), rounds), 1)
    return {**_fit(points), "host": os.uname().nodename}


def profile_allreduce(ranks=(2, 3, 4, 5, 6), sizes=ALLREDUCE_SIZES, rounds: int = 100,
                      after_compute_s: float = AFTER_COMPUTE_S) -> list[dict]:
    """Gloo all-reduce seconds on this host for k ranks and n bytes, measured (not a ring
    formula: with more ranks than cores the ring's hops wait for descheduled members), and the
    CPU seconds each member's process spends in one (gloo's threads included). Rows
    {"ranks", "bytes", "seconds", "cpu_s"}: in situ the means over rounds and ranks; back to
    back (after_compute_s=0) rank 0's medians."""
    rows = []
    for k in ranks:
        items = spawn(_all_reduces, k, (list(sizes), rounds, after_compute_s), k)
        by_rank = dict(items)
        for i, n in enumerate(sizes):
            if after_compute_s > 0:
                seconds, cpu = (float(np.mean([t for r in by_rank.values() for t in r[i][j]]))
                                for j in (1, 2))
            else:
                seconds, cpu = (statistics.median(by_rank[0][i][j]) for j in (1, 2))
            rows.append({"ranks": k, "bytes": n, "seconds": seconds, "cpu_s": cpu})
    return rows


def profile_links(max_ranks: int = 6, after_compute_s: float = AFTER_COMPUTE_S,
                  sessions: int = 2) -> dict:
    """Everything the simulator needs about this host's gloo, in situ, plus the back-to-back
    figures under "hot" for comparison. The in-situ means move a lot from one minute to the
    next on a shared VM (2-10x for a small all-reduce here), so they are measured in
    `sessions` separate sessions and averaged."""
    ranks = tuple(range(2, max_ranks + 1))
    hot = {**profile_p2p(after_compute_s=0.0),
           "allreduce": profile_allreduce(ranks, after_compute_s=0.0)}
    hot.pop("host")
    p2p, allreduce = [], []
    for _ in range(sessions):
        p2p.append(profile_p2p(after_compute_s=after_compute_s)["points"])
        allreduce.append(profile_allreduce(ranks, after_compute_s=after_compute_s))
    points = [(p["bytes"], float(np.mean([s[i]["one_way_s"] for s in p2p])))
              for i, p in enumerate(p2p[0])]
    rows = [{**r, **{key: float(np.mean([s[i][key] for s in allreduce]))
                     for key in ("seconds", "cpu_s")}}
            for i, r in enumerate(allreduce[0])]
    cpu = profile_message_cpu()
    return {**_fit(points), "host": os.uname().nodename, "allreduce": rows,
            "after_compute_s": after_compute_s, "statistic": f"mean of {sessions} sessions",
            "message_cpu": cpu["message_cpu"],
            "message_cpu_origin": (f"{os.uname().nodename}: heterps-exec profile "
                                   "(calibration/gloo_cpu.py: gloo isend/irecv, one message "
                                   "every 1 ms, process CPU of each side, median of 5 rounds "
                                   "of 200, a + b x bytes over 256 B-512 KiB)"),
            "hot": hot}
