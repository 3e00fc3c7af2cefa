"""A module computing with other tensors in its parameters' places: a step's weight version
under async (runtime/versions.py, the oracle's runtime/reference.py, model/extra_loss.py).

    slots = parameter_slots(module, {id(p): key for key, p in ...})
    with swapped(slots, {key: tensor}):
        module(x)                       # reads the tensors; its own parameters after

A slot is an (owner module, attribute) a parameter sits at. Every slot is swapped, a tied
parameter's second name included, and in the module whose code reads it: a wrapper that
registers a wrapped module's parameters again (UserWhole, UserStage) holds them in a dict of
its own, and torch.func.functional_call on the wrapper would swap that dict only. Writing
owner._parameters directly also saves functional_call's 130 us per call (exec-tiny's stages:
half a small stage's forward), which a per-forward swap pays.
"""

from __future__ import annotations

from collections.abc import Hashable
from contextlib import contextmanager

import torch
from torch import nn


def parameter_slots(module: nn.Module, keys: dict[int, Hashable]) -> list[tuple]:
    """(owner, attribute, key, parameter) for every place in `module` a parameter whose id
    `keys` names sits."""
    return [(module.get_submodule(full.rpartition(".")[0]), full.rpartition(".")[2],
             keys[id(p)], p)
            for full, p in module.named_parameters(remove_duplicate=False) if id(p) in keys]


@contextmanager
def swapped(slots: list[tuple], tensors: dict[Hashable, torch.Tensor]):
    """The slots hold `tensors[key]` inside, their own parameters again after."""
    for owner, attr, key, _ in slots:
        owner._parameters[attr] = tensors[key]
    try:
        yield
    finally:
        for owner, attr, _, p in slots:
            owner._parameters[attr] = p
