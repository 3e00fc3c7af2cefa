"""The extra loss of a user model (`model.extra_loss`) in training: its gradient once per step.

    stage.extra_loss()          # a stage's replica 0, at the start of each step
    whole.extra_loss()          # the single-process oracle, once per step

A training loop that minimises `mean loss of the batch + fn(model)` (a regularisation term
from the parameters: inputs/torch_model/hooks.py) takes the term's gradient once per step,
whatever the batch is cut into. The engine does the same: replica 0 of every stage evaluates
fn on its rank's whole module at the start of the step (the parameters are the step's weights:
gpipe and 1f1b update only at the step end) and adds the gradient of its OWN parameters to
their .grad, before any microbatch backward; the stage all-reduce sums replicas' gradients,
so the term counts once, and the optimizer steps on data + term as one process does. The
other stages' parameters on this rank are the never-updated copies every rank builds: their
gradients are not taken, and a term mixing two stages' parameters would read stale values
(hence the rule that each term reads one stage's). Parameters no layer reads (a submodule
never called) are not trained by the engine, so the oracle leaves the term's gradient on
them out too. The printed loss is the data loss; the term shows in the weights.

Knowingly left out: async plans (a step's gradient is taken at an older version) and tables
on the parameter server (their rows live on the shards); both are refused at launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn


def add_gradient(fn: Callable, module: nn.Module, params: Sequence[nn.Parameter]) -> float:
    """Add d fn(module) / d p to every p.grad in `params`; returns fn's value."""
    value = fn(module)
    if params:
        grads = torch.autograd.grad(value, list(params), allow_unused=True)
        for p, g in zip(params, grads, strict=True):
            if g is not None:
                p.grad = g.detach() if p.grad is None else p.grad + g.detach()
    return float(value.detach())


def trained(module: nn.Module, chain) -> list[nn.Parameter]:
    """The module's parameters some layer of the captured chain reads (the ones trained)."""
    read = {t for i in range(len(chain.names)) for t in chain.params_of(i)}
    return [p for name, p in module.named_parameters() if name in read and p.requires_grad]
