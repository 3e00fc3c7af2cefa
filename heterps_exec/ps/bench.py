"""The measurements behind `heterps-exec ps-bench` (and benchmarks/bench_ps.py).

On one Zipf id stream (batches of `batch` ids): end-to-end pull and push rows/s through PS
ranks in their own processes, per-tier hit rates measured by the servers, the same stream
replayed through the policy (`heterps_sim/tiers/replay.py`, which must agree) and through Belady's optimum,
raw gloo point-to-point rows/s (ids one way, rows back, nothing else) and an in-process
`nn.EmbeddingBag` forward as the ceiling. Rows/s count the ids of a batch (duplicates
included: what a trainer asks for); `unique` figures count the rows that crossed the wire.
Pulls are timed twice: one at a time (a pull, then its step's end), and pipelined with
`window` pulls in flight (post pull b + window - 1, then wait for pull b), as a trainer that
prefetches the next microbatches does; raw gloo is measured both ways too.
`quantize` encodes pulled rows and pushed gradients on the wire (client.py).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import deque

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from heterps_exec.ps.local import run_local
from heterps_exec.ps.spec import TableSpec
from heterps_sim.tiers.replay import belady_hit_rate, replay_hit_rates, zipf_ids


def _client(client, index, spec_dict, stream, batch, warmup, window):
    spec = TableSpec.from_dict(spec_dict)
    client.declare(spec)
    ids = torch.from_numpy(stream).view(-1, batch)
    n = ids.shape[0]
    pull_s = 0.0
    for b in range(n):  # one step per batch, as in training (paddle's pass = a step)
        t0 = time.perf_counter()
        client.pull(spec.name, ids[b])
        if b >= warmup:  # the first batches warm the code paths, untimed
            pull_s += time.perf_counter() - t0
        client.end_step(b)
    hit_stats = client.stats()  # tier counts of exactly this pass over the stream
    t0 = time.perf_counter()
    in_flight = deque()
    for b in range(warmup, n):  # `window` pulls in flight, waited for in order
        in_flight.append(client.prefetch(spec.name, ids[b]))
        if len(in_flight) >= window:
            in_flight.popleft().wait()
    while in_flight:
        in_flight.popleft().wait()
    window_s = time.perf_counter() - t0
    grads = torch.full((batch, spec.dim), 1e-3)
    t0 = time.perf_counter()
    for b in range(warmup, n):
        client.push(spec.name, ids[b], grads)
        client.end_step(n + b)
    push_s = time.perf_counter() - t0
    return {"pull_s": pull_s, "window_s": window_s, "push_s": push_s,
            "timed_batches": n - warmup, "stats": hit_stats, "final_stats": client.stats()}


def _raw_entry(rank, init_file, batch, dim, iters, windows, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    ids = torch.zeros(batch, dtype=torch.int64)
    rows = [torch.zeros(batch, dim) for _ in range(max(windows))]
    rates = []
    for window in windows:  # one world for every window: a world costs seconds to start
        t0 = time.perf_counter()
        if rank == 0:  # the client: ids out, rows back, `window` requests in flight
            in_flight = deque()
            for i in range(iters):
                in_flight.append((dist.irecv(rows[i % window], 1), dist.isend(ids, 1)))
                while len(in_flight) >= window or (i == iters - 1 and in_flight):
                    recv, send = in_flight.popleft()  # a send's work must outlive the send
                    recv.wait()
                    send.wait()
            rates.append(iters * batch / (time.perf_counter() - t0))
        else:
            for _ in range(iters):
                dist.recv(ids, 0)
                dist.send(rows[0], 0)
    if rank == 0:
        out.put(rates)
    dist.destroy_process_group()


def raw_p2p_rows_per_s(batch: int, dim: int, iters: int = 300,
                       windows: tuple[int, ...] = (1,)) -> list[float]:
    """Rows/s of bare gloo send/recv between two processes: `batch` ids out, rows back, with
    each of `windows` requests in flight (one measurement each, in one world)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init")
        procs = [ctx.Process(target=_raw_entry, args=(r, init, batch, dim, iters, windows, out),
                             daemon=True) for r in range(2)]
        for p in procs:
            p.start()
        try:
            return [float(x) for x in out.get(timeout=120)]
        finally:
            for p in procs:
                p.join(10)
                if p.is_alive():
                    p.kill()


def embedding_bag_rows_per_s(stream: np.ndarray, rows: int, dim: int, batch: int) -> float:
    """Rows/s of an in-process nn.EmbeddingBag(mode="sum") forward over the same batches."""
    torch.set_num_threads(1)
    emb = torch.nn.EmbeddingBag(rows, dim, mode="sum")
    ids = torch.from_numpy(stream).view(-1, batch, 1)
    with torch.no_grad():
        emb(ids[0])
        t0 = time.perf_counter()
        for b in ids:
            emb(b)
    return stream.size / (time.perf_counter() - t0)


def run_bench(*, rows: int, dim: int, zipf: float, hot_fraction: float, warm_fraction: float,
              policy: str, batch: int, shards: int, batches: int, seed: int = 0,
              window: int = 4, quantize: str = "none", work_dir: str | None = None,
              progress=None) -> dict:
    """All measurements as one dict (see module docstring)."""
    say = progress or (lambda msg: None)
    warmup = min(10, max(batches // 10, 1))
    stream = zipf_ids((batches + warmup) * batch, rows, zipf, seed=seed)
    spec = TableSpec(name="bench", rows=rows, dim=dim)
    hot_rows = int(rows * hot_fraction)
    say("PS world: pulls, prefetched pulls, pushes")
    config = {"policy": policy, "hot_fraction": hot_fraction, "warm_fraction": warm_fraction,
              "seed": seed}
    if work_dir:
        config["work_dir"] = work_dir
    res = run_local(_client, (spec.to_dict(), stream, batch, warmup, window),
                    num_servers=shards, config=config, timeout_s=570,
                    client_options={"quantize": quantize})[0]
    measured = dict.fromkeys(("hot", "warm", "cold", "new"), 0)
    for server in res["stats"]["servers"]:
        for tier in measured:
            measured[tier] += server["tables"]["bench"][f"{tier}_hits"]
    total = max(sum(measured.values()), 1)
    say("replay and Belady on the same stream")
    replay = replay_hit_rates(stream, policy, hot_rows, warm_rows=int(rows * warm_fraction),
                              num_shards=shards, batch_size=batch)
    belady = belady_hit_rate(stream, hot_rows, num_shards=shards, batch_size=batch)
    say("raw gloo point-to-point and in-process EmbeddingBag")
    raw, raw_window = raw_p2p_rows_per_s(batch, dim, windows=(1, window))
    ceiling = embedding_bag_rows_per_s(stream[warmup * batch:], rows, dim, batch)
    timed = res["timed_batches"] * batch
    client = res["stats"]["client"]["bench"]
    unique_share = client["pull_unique_rows"] / max(client["pull_rows"], 1)
    return {
        "config": {"rows": rows, "dim": dim, "zipf": zipf, "hot_fraction": hot_fraction,
                   "warm_fraction": warm_fraction, "policy": policy, "batch": batch,
                   "shards": shards, "timed_batches": res["timed_batches"], "seed": seed,
                   "window": window, "quantize": quantize},
        "pull_rows_per_s": timed / res["pull_s"],
        "pull_window_rows_per_s": timed / res["window_s"],
        "push_rows_per_s": timed / res["push_s"],
        "unique_share": unique_share,
        "pull_bytes_per_row": client["pull_bytes"] / max(client["pull_unique_rows"], 1),
        "raw_p2p_rows_per_s": raw,
        "raw_p2p_window_rows_per_s": raw_window,
        "pull_vs_raw_p2p": timed / res["pull_s"] / raw,
        "pull_window_vs_raw_p2p_window": timed / res["window_s"] / raw_window,
        "embedding_bag_rows_per_s": ceiling,
        "hit_rates_measured": {k: v / total for k, v in measured.items()},
        "hit_rates_replayed": {k: replay[k] for k in measured},
        "belady_hot_hit_rate": belady,
        "servers": res["final_stats"]["servers"],
    }
