"""Plain single-process training on the same global batches: the engine's correctness oracle.

A plan run for N steps must end with the loss and weights this produces (tests compare them to
1e-5). Same model construction, same data order, same optimizer; each step runs the plan's m
microbatches in order, one forward and backward each, gradients summed, then one update:
what the engine does, with the stages glued back together. That is the meaning of "single
process" for what depends on the microbatch: BatchNorm normalises each microbatch by its own
statistics and takes m running-statistics updates per step, in microbatch order (the engine
sums a replicated stage's updates to the same values, model/batchnorm.py; the scenario's
model.batchnorm broadcast and sync have oracles of their own, runtime/reference_norms.py);
dropout draws microbatch i's masks of step t from (seed, t, i, layer) (model/dropout.py), as
every rank does.

An async plan trains with stale gradients by a fixed rule (heterps_sim.core.asynchrony):
step t's gradient is taken at W(max(0, t - D)) and updates W(t). The oracle applies that rule
to the whole model at once; it knows nothing of stages, replicas, microbatch order or timing,
so an engine run equals it only if every stage of every layout reads the versions the rule
says.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch

from heterps_exec.data.readers import open_stream
from heterps_exec.model.build import build_model
from heterps_exec.model.dropout import EagerDropout, microbatch
from heterps_exec.model.spec_graph import graph_for
from heterps_exec.model.swap import parameter_slots, swapped
from heterps_exec.runtime.layout import RunSpec, microbatch_bounds
from heterps_exec.runtime.reference_norms import replica_zero_only, replicated_norms, sync_step
from heterps_exec.runtime.worker import make_optimizer
from heterps_sim.core.asynchrony import staleness, version_of


@contextmanager
def reading(model: torch.nn.Module, read: dict[str, torch.Tensor] | None):
    """The model computes with the tensors `read` (by parameter name) in place of its
    parameters inside (nothing changes for None), swapped in a user model's own module
    (UserWhole.inner), where its forward reads them (model/swap.py)."""
    if read is None:
        yield
        return
    names = {id(p): n for n, p in model.named_parameters() if n in read}
    with swapped(parameter_slots(getattr(model, "inner", model), names), read):
        yield


def train_reference(spec: RunSpec, steps: int | None = None, *,
                    staleness_steps: int | None = None) -> tuple[list[float], dict]:
    """(per-step summed losses, final state dict) of single-process training. A user's
    PyTorch module trains EAGER and whole: the oracle for its captured, cut, pipelined and
    replicated run. `staleness_steps` overrides an async plan's D (convergence studies)."""
    if spec.user_model:  # the user's own module (model/user_model.py), seeded, tables set
        from heterps_exec.model.user_model import whole_model
        model = whole_model(spec)
    else:
        model = build_model(graph_for(spec), seed=spec.seed)
    model.train()
    optimizer = make_optimizer(spec, model)
    stream = open_stream(spec)
    plan = spec.plan_obj()
    d = (staleness_steps if staleness_steps is not None else
         staleness([st.num_replicas for st in plan.stages], plan.num_microbatches)
         if plan.schedule == "async" else 0)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    kept = {0: {n: p.detach().clone() for n, p in named}}  # W(v) for the steps that read it
    losses = []
    bounds = microbatch_bounds(spec.batch_size, plan.num_microbatches)
    masks = EagerDropout if spec.user_model else nullcontext  # (the zoo has no dropout)
    rule = (spec.user_model or {}).get("section", {}).get("batchnorm", "exact")
    norms = replicated_norms(spec, model) if rule != "exact" else {}
    for step in range(spec.steps if steps is None else steps):
        batch = {k: torch.from_numpy(v) for k, v in stream.batch(step).items()}
        read = (None if d == 0 else
                {n: t.detach().requires_grad_() for n, t in kept[version_of(step, d)].items()})
        loss_sum = 0.0
        if rule == "sync":  # the whole batch at once (refused under async: no `read`)
            loss_sum = sync_step(model, norms, batch, spec.seed, step, bounds, spec.batch_size)
        else:
            for i, (lo, hi) in enumerate(bounds):
                part = {k: v[lo:hi] for k, v in batch.items()}
                with microbatch(spec.seed, step, i), masks(), reading(model, read), \
                        replica_zero_only(norms, step * len(bounds) + i):  # (broadcast)
                    _, loss = model(part)
                (loss / spec.batch_size).backward()
                loss_sum += float(loss.detach())
        if spec.user_model:  # model.extra_loss: its gradient once per step (model/extra_loss.py)
            with reading(model, read):  # (async: at the version the step reads)
                model.extra_loss(read)
        if read is not None:
            for n, p in named:
                p.grad = read[n].grad
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss_sum)
        if d:
            kept[step + 1] = {n: p.detach().clone() for n, p in named}
            kept.pop(version_of(step, d) if step >= d else -1, None)
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}
