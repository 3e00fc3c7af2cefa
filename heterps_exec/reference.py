"""Plain single-process training on the same global batches: the engine's correctness oracle.

A plan run for N steps must end with the loss and weights this produces (tests compare them to
1e-5). Same model construction, same data order, same optimizer; the whole batch at once.
"""

from __future__ import annotations

import torch

from heterps_exec.data.readers import open_stream
from heterps_exec.layout import RunSpec
from heterps_exec.model.build import build_model
from heterps_exec.worker import graph_for, make_optimizer


def train_reference(spec: RunSpec, steps: int | None = None) -> tuple[list[float], dict]:
    """(per-step summed losses, final state dict) of single-process training."""
    if spec.user_model:  # the user's own eager module (model/user_model.py)
        from heterps_exec.model.user_model import train_user_reference
        return train_user_reference(spec, make_optimizer, steps)
    graph = graph_for(spec)
    model = build_model(graph, seed=spec.seed)
    optimizer = make_optimizer(spec, model)
    stream = open_stream(spec)
    losses = []
    for step in range(spec.steps if steps is None else steps):
        batch = {k: torch.from_numpy(v) for k, v in stream.batch(step).items()}
        _, loss_sum = model(batch)
        (loss_sum / spec.batch_size).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss_sum.detach()))
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}
