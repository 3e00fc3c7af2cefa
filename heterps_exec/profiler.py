"""Measure a zoo model's layers and this machine's links: the inputs of a calibrated model.

    rows = profile_layers(graph, batches=(8, 64, 256), device="cpu")   # one row per layer x batch
    link = profile_p2p()                          # gloo loopback: latency_s, bytes_per_s, points

Per layer: forward and backward seconds on `device` (median of `repeats`, after warm-up),
timed in isolation on real inputs (the layers before it run once, untimed, to make them; its
gradient-carrying inputs are fresh leaves, so its backward computes exactly what it does in a
pipeline). Timed at several batch sizes, a layer's time is fitted as fixed + per-sample cost
(`fit_linear`): a microbatch of b samples costs a + c * b, which is what makes 32 microbatches
of 8 slower than one of 256. The boundary after the layer is also timed: encoding it into the
wire format and decoding it (the runtime's per-message CPU work).
Links: two processes ping-pong gloo messages of growing size; one-way time = latency +
bytes / bandwidth, fitted by least squares.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from heterps_exec.data import BatchStream, generate_dataset
from heterps_exec.models import build_model
from heterps_exec.partition import boundary_after
from heterps_sim.zoo_layers import ModelGraph


def _timed(fn, repeats: int, warmup: int, device: torch.device) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _leafify(env: dict, graph: ModelGraph) -> dict:
    """Detached copies; float tensors that carry a gradient become leaves that collect one."""
    out = {}
    for k, v in env.items():
        v = v.detach().clone()
        if v.is_floating_point() and graph.tensor_grad.get(k, True):
            v.requires_grad_(True)
        out[k] = v
    return out


def profile_layers(graph: ModelGraph, *, batches=(8, 64, 256), device: str = "cpu",
                   repeats: int = 15, warmup: int = 3, seed: int = 0) -> list[dict]:
    """One row per (layer, batch): forward_s, backward_s, optimizer_s (one SGD update of the
    layer's parameters, per step), encode_s, decode_s."""
    device = torch.device(device)
    model = build_model(graph, seed=seed, device=device)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        generate_dataset(graph, d, num_samples=max(batches), seed=seed)
        full = BatchStream(d, batch_size=max(batches), seed=seed).batch(0)
    names = [n.name for n in graph.nodes]
    for batch in batches:
        env = {k: torch.from_numpy(v[:batch]).to(device) for k, v in full.items()}
        for i, name in enumerate(names):
            layer = getattr(model, name)
            inputs = _leafify(env, graph)

            def forward(layer=layer, inputs=inputs):
                return layer.run(inputs)

            fwd_s = _timed(forward, repeats, warmup, device)
            outs = forward()

            def backward(outs=outs):
                tensors = [t for t in outs.values() if t.requires_grad]
                if tensors:
                    grads = [torch.ones_like(t) if t.dim() == 0 else torch.full_like(t, 1e-3)
                             for t in tensors]
                    torch.autograd.backward(tensors, grads, retain_graph=True)

            bwd_s = _timed(backward, repeats, warmup, device)
            params = [p for p in layer.parameters() if p.grad is not None]
            opt_s = 0.0
            if params:  # the per-step update of this layer's parameters (SGD, as the engine)
                sgd = torch.optim.SGD(params, lr=1e-9)

                def update(sgd=sgd, params=params):
                    sgd.step()
                    for p in params:  # the engine drops grads (set_to_none); put them back
                        p.grad = torch.zeros_like(p)

                opt_s = _timed(update, repeats, warmup, device)
            with torch.no_grad():
                env = {**env, **{k: v.detach() for k, v in layer.run(env).items()}}
            enc_s = dec_s = 0.0
            if i < len(names) - 1:
                b = boundary_after(graph, name)
                message = b.encode(env)[0]
                enc_s = _timed(lambda b=b, e=env: b.encode(e), repeats, warmup, device)
                dec_s = _timed(lambda b=b, m=message: b.decode(m), repeats, warmup, device)
            rows.append({"model": graph.name, "layer": name, "batch_size": batch,
                         "forward_s": fwd_s, "backward_s": bwd_s, "optimizer_s": opt_s,
                         "encode_s": enc_s,
                         "decode_s": dec_s, "device": str(device),
                         "threads": torch.get_num_threads()})
    return rows


def fit_linear(xs, ys) -> tuple[float, float]:
    """(a, c) of y = a + c x by least squares, both clipped at 0."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if len(set(xs)) < 2:
        return 0.0, float(ys.mean() / xs.mean())
    c, a = np.polyfit(xs, ys, 1)
    return max(float(a), 0.0), max(float(c), 0.0)


def _ping_pong(rank: int, store_path: str, sizes: list[int], rounds: int, queue) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
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


def profile_p2p(sizes=(64, 4096, 65536, 1 << 20, 4 << 20), rounds: int = 30) -> dict:
    """One-way gloo loopback time per message size, and its latency + bandwidth fit."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        store = str(Path(d) / "store")
        procs = [ctx.Process(target=_ping_pong, args=(r, store, list(sizes), rounds, queue))
                 for r in range(2)]
        for p in procs:
            p.start()
        points = queue.get(timeout=300)
        for p in procs:
            p.join(timeout=60)
    latency, per_byte = fit_linear([s for s, _ in points], [t for _, t in points])
    return {"latency_s": latency, "bytes_per_s": 1.0 / per_byte if per_byte > 0 else float("inf"),
            "points": [{"bytes": s, "one_way_s": t} for s, t in points],
            "host": os.uname().nodename}


def _all_reduces(rank: int, world: int, store_path: str, sizes: list[int], rounds: int,
                 queue) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank,
                            world_size=world)
    results = []
    for size in sizes:
        buf = torch.zeros(max(size // 4, 1), dtype=torch.float32)
        times = []
        for r in range(rounds + 3):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            if r >= 3:
                times.append(time.perf_counter() - t0)
        results.append((size, statistics.median(times)))
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def profile_allreduce(ranks=(2, 3, 4, 5, 6), sizes=(4, 65536, 1 << 20, 4 << 20),
                      rounds: int = 20) -> list[dict]:
    """Gloo all-reduce time on this host for k ranks and n bytes, measured (not a ring
    formula): with more ranks than cores the ring's hops wait for descheduled members,
    which only a measurement captures. Rows {"ranks", "bytes", "seconds"} (median)."""
    ctx = mp.get_context("spawn")
    rows = []
    for k in ranks:
        queue = ctx.Queue()
        with tempfile.TemporaryDirectory() as d:
            store = str(Path(d) / "store")
            procs = [ctx.Process(target=_all_reduces,
                                 args=(r, k, store, list(sizes), rounds, queue))
                     for r in range(k)]
            for p in procs:
                p.start()
            points = queue.get(timeout=300)
            for p in procs:
                p.join(timeout=60)
        rows += [{"ranks": k, "bytes": n, "seconds": t} for n, t in points]
    return rows


def profile_links(max_ranks: int = 6) -> dict:
    """Everything the simulator needs about this host's gloo: the point-to-point fit
    (profile_p2p) and measured all-reduce times for 2..max_ranks ranks."""
    return {**profile_p2p(), "allreduce": profile_allreduce(tuple(range(2, max_ranks + 1)))}
