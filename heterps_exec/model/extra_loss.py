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

`check_separable` holds a plan to that rule at launch (models up to CHECK_MAX_VALUES values,
built on the CPU): each stage's gradient must not move when the other stages' parameters do.
Under async a step's gradient is taken at the version W(t - D) its forwards read
(heterps_sim.core.asynchrony), and so is the term's: the engine's replica 0 evaluates fn at a
step's first forward with that version's tensors swapped in (runtime/versions.py) and adds
the gradient to them; the oracle does the same with the whole model (runtime/reference.py).

Knowingly left out: tables on the parameter server (their rows live on the shards): refused
at launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from heterps_exec.model.swap import parameter_slots, swapped

CHECK_MAX_VALUES = 1 << 24
"""Largest model (parameter values) built on the CPU to check the extra loss's terms."""


def add_gradient(fn: Callable, module: nn.Module, params: Sequence[nn.Parameter]) -> float:
    """Add d fn(module) / d p to every p.grad in `params`; returns fn's value."""
    value = fn(module)
    if params:
        grads = torch.autograd.grad(value, list(params), allow_unused=True)
        for p, g in zip(params, grads, strict=True):
            if g is not None:
                p.grad = g.detach() if p.grad is None else p.grad + g.detach()
    return float(value.detach())


class StageTerm:
    """A stage's share of the extra loss: `term()` adds fn's gradient to the stage's own
    parameters; `term(tensors)` evaluates fn with `tensors` (the async version the step
    reads, in the parameters' order) in their place in the user's module, where fn reads
    them (the stage's captured graph holds the same parameters under other owners), and adds
    the gradient to them."""

    def __init__(self, fn: Callable, module: nn.Module, params: Sequence[nn.Parameter]) -> None:
        self.fn, self.module, self.params = fn, module, list(params)

    def __call__(self, tensors: Sequence[torch.Tensor] | None = None) -> float:
        if tensors is None:
            return add_gradient(self.fn, self.module, self.params)
        slots = parameter_slots(self.module, {id(p): x for x, p in enumerate(self.params)})
        with swapped(slots, dict(enumerate(tensors))):
            return add_gradient(self.fn, self.module, tensors)


def trained(module: nn.Module, chain) -> list[nn.Parameter]:
    """The module's parameters some layer of the captured chain reads (the ones trained)."""
    read = {t for i in range(len(chain.names)) for t in chain.params_of(i)}
    return [p for name, p in module.named_parameters() if name in read and p.requires_grad]


def check_separable(fn: Callable, module: nn.Module, stage_params: list[list[str]]) -> str:
    """'' when each stage's gradient of fn(module) ignores the other stages' parameters, else
    a sentence naming two stages whose parameters one term mixes. `stage_params`: the
    parameter names each stage trains. The other stages' parameters are moved (scaled by 1.5
    and shifted), as a rank's untrained copies differ from the trained ones."""
    params = dict(module.named_parameters())
    base = _grads(fn, module, params)
    stage_params = [[n for n in own if n in params] for own in stage_params]  # (no buffers)
    for g, own in enumerate(stage_params):
        others = [n for n in params if n not in own]
        if not own or not others:
            continue
        kept = {n: params[n].detach().clone() for n in others}
        with torch.no_grad():
            for n in others:
                params[n].mul_(1.5).add_(0.25)
        try:
            moved = _grads(fn, module, params)
        finally:
            with torch.no_grad():
                for n in others:
                    params[n].copy_(kept[n])
        for n in own:
            if not torch.allclose(moved[n], base[n], rtol=1e-4, atol=1e-7):
                other = next((h for h, names in enumerate(stage_params) if h != g and names), g)
                return (f"its gradient for {n!r} (stage {g}) changes with the parameters of "
                        f"other stages (e.g. stage {other}): a term mixes parameters of two "
                        "stages")
    return ""


def _grads(fn: Callable, module: nn.Module, params: dict) -> dict[str, torch.Tensor]:
    names = [n for n, p in params.items() if p.requires_grad]
    grads = torch.autograd.grad(fn(module), [params[n] for n in names], allow_unused=True)
    return {n: (g if g is not None else torch.zeros_like(params[n]))
            for n, g in zip(names, grads, strict=True)}
