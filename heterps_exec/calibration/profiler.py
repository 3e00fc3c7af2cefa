"""Measure a zoo model's layers and this machine's links: the inputs of a calibrated model.

    rows = profile_layers(graph, batches=(8, 64, 256), device="cpu")   # one row per layer x batch

Per layer: forward and backward seconds on `device` (median of `repeats`, after warm-up),
timed in isolation on real inputs (the layers before it run once, untimed, to make them; its
gradient-carrying inputs are fresh leaves, so its backward computes exactly what it does in a
pipeline). Timed at several batch sizes, a layer's time is fitted as fixed + per-sample cost
(`fit_linear`): a microbatch of b samples costs a + c * b, which is what makes 32 microbatches
of 8 slower than one of 256. The boundary after the layer is also timed: encoding it into the
wire format and decoding it (the runtime's per-message CPU work).
The links (gloo point-to-point and all-reduce) are timed by calibration/links.py.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import numpy as np
import torch

from heterps_exec.data import BatchStream, generate_dataset
from heterps_exec.model.build import build_model
from heterps_exec.model.partition import boundary_after
from heterps_sim.inputs.graph import ModelGraph


def backward_and_update_s(ends: list, module: torch.nn.Module, repeats: int, warmup: int,
                          device) -> tuple[float, float]:
    """Seconds of one backward from `ends` (the tensors a layer emits) and of the SGD update of
    `module`'s parameters that got a gradient (the engine's per-step update)."""

    def backward():
        if ends:
            grads = [torch.ones_like(t) if t.dim() == 0 else torch.full_like(t, 1e-3) for t in ends]
            torch.autograd.backward(ends, grads, retain_graph=True)

    bwd_s = _timed(backward, repeats, warmup, device)
    params = [p for p in module.parameters() if p.grad is not None]
    if not params:
        return bwd_s, 0.0
    sgd = torch.optim.SGD(params, lr=1e-9)

    def update():
        sgd.step()
        for p in params:  # the engine drops grads (set_to_none); put them back
            p.grad = torch.zeros_like(p)

    return bwd_s, _timed(update, repeats, warmup, device)


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
            ends = [t for t in outs.values() if t.requires_grad]
            bwd_s, opt_s = backward_and_update_s(ends, layer, repeats, warmup, device)
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
