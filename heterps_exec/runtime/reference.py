"""Plain single-process training on the same global batches: the engine's correctness oracle.

A plan run for N steps must end with the loss and weights this produces (tests compare them to
1e-5). Same model construction, same data order, same optimizer; the whole batch at once.
"""

from __future__ import annotations

import torch

from heterps_exec.data.readers import open_stream
from heterps_exec.model.build import build_model
from heterps_exec.model.spec_graph import graph_for
from heterps_exec.runtime.layout import RunSpec
from heterps_exec.runtime.worker import make_optimizer


def train_reference(spec: RunSpec, steps: int | None = None) -> tuple[list[float], dict]:
    """(per-step summed losses, final state dict) of single-process training. A user's
    PyTorch module trains EAGER and whole: the oracle for its captured, cut, pipelined and
    replicated run."""
    if spec.user_model:  # the user's own module (model/user_model.py), seeded, tables set
        from heterps_exec.model.user_model import whole_model
        model = whole_model(spec)
    else:
        model = build_model(graph_for(spec), seed=spec.seed)
    model.train()
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
