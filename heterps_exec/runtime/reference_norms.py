"""The oracle's BatchNorm under model.batchnorm broadcast and sync (runtime/reference.py).

Single-process training with each rule's meaning, written apart from the engine's code for
it (model/norm_rules.py), so that a bug there shows. It reads only the plan: which stage each
BatchNorm runs in (RunSpec.user_model["norm_stages"]) and that stage's replica count k.

    broadcast   microbatch i of step t runs on replica (t*m + i) mod k of a stage; the
                saved statistics are replica 0's, so a BatchNorm of a stage with k > 1
                updates its running statistics and its count for replica 0's microbatches
                only (track_running_stats off around the others' forwards).
    sync        the step's m microbatches run as ONE forward of the whole batch: each
                BatchNorm cuts its input into groups of k consecutive microbatches and
                normalises each group by the group's statistics (F.batch_norm on the group:
                forward and backward over its samples), its running statistics updated once
                per group, in order; every random call draws microbatch i's mask for
                microbatch i's rows, as the engine's forwards do. Knowingly assumes that
                nothing but BatchNorm mixes samples, and that random calls are the dropout
                family (the engine's fixtures; attention dropout and torch.rand_like & co.
                raise here).

    step of m = 4, a stage on k = 2:
        broadcast   microbatches 0, 2 update its statistics (t even); 1, 3 for odd t when
                    k does not divide m
        sync        groups {0, 1}, {2, 3}: two updates per step
"""

from __future__ import annotations

import types
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional as nnf
from torch.nn.modules.batchnorm import _BatchNorm

from heterps_exec.model import draws
from heterps_exec.model.dropout import _ORIGINAL_SDPA, EagerDropout
from heterps_exec.model.seeding import microbatch


def replicated_norms(spec, model: nn.Module) -> dict[_BatchNorm, int]:
    """Each BatchNorm module of the eager model in a stage the plan replicates -> its k."""
    inner = getattr(model, "inner", model)
    stages = spec.plan_obj().stages
    out = {}
    for owner, g in (spec.user_model.get("norm_stages") or {}).items():
        k = stages[g].num_replicas
        if k > 1:
            module = inner.get_submodule(owner) if owner else inner
            if not isinstance(module, _BatchNorm):
                raise NotImplementedError(f"the oracle of model.batchnorm covers torch.nn "
                                          f"BatchNorm modules; {owner!r} is a {type(module)}")
            out[module] = k
    return out


@contextmanager
def replica_zero_only(norms: dict[_BatchNorm, int], mu: int):
    """broadcast: around global microbatch mu's forward, the BatchNorms of stages where
    replica 0 does not run it leave their running statistics and count alone."""
    off = [bn for bn, k in norms.items() if mu % k]
    for bn in off:
        bn.track_running_stats = False
    try:
        yield
    finally:
        for bn in off:
            bn.track_running_stats = True


def _grouped_forward(sizes: list[int]):
    def forward(self, x):
        if not self.training:
            return nn.modules.batchnorm._BatchNorm.forward(self, x)
        outs = []
        for piece in x.split(sizes):
            self.num_batches_tracked.add_(1)
            a = (self.momentum if self.momentum is not None
                 else 1.0 / float(self.num_batches_tracked))
            outs.append(nnf.batch_norm(piece, self.running_mean, self.running_var,
                                       self.weight, self.bias, True, a, self.eps))
        return torch.cat(outs)
    return forward


@contextmanager
def grouped_norms(model: nn.Module, norms: dict[_BatchNorm, int], sizes: list[int]):
    """sync: inside, each BatchNorm of the whole-batch forward normalises groups of k
    microbatches (k = 1 outside replicated stages); `sizes`: the microbatches' sizes."""
    inner = getattr(model, "inner", model)
    patched = []
    for bn in inner.modules():
        if isinstance(bn, _BatchNorm):
            k = norms.get(bn, 1)
            groups = [sum(sizes[j:j + k]) for j in range(0, len(sizes), k)]
            bn.forward = types.MethodType(_grouped_forward(groups), bn)
            patched.append(bn)
    try:
        yield
    finally:
        for bn in patched:
            del bn.forward


class SplitDropout(EagerDropout):
    """EagerDropout for a whole-batch forward: each random call draws, for microbatch i's
    rows, the mask microbatch i's own forward draws (seed, step, i, call)."""

    def __init__(self, seed: int, step: int, sizes: list[int]) -> None:
        super().__init__()
        self.key, self.sizes = (seed, step), sizes

    def _each(self, fn, x, p, train, layer):
        if x.shape[0] != sum(self.sizes):
            raise NotImplementedError("the sync oracle draws masks per microbatch along the "
                                      f"batch dimension; a random call got shape {tuple(x.shape)}")
        outs = []
        for i, piece in enumerate(x.split(self.sizes)):
            with microbatch(*self.key, i):
                outs.append(fn(piece, p, train, layer))
        return torch.cat(outs)

    def _counted(self, fn):
        def call(x, p=0.5, train=True):
            return self._each(fn, x, p, train, self._next())
        return call

    def _attention(self, *args, **kwargs):
        raise NotImplementedError("the sync oracle covers the dropout family, not attention "
                                  "dropout")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self._BUILTINS:
            x, *rest = args
            p = rest[0] if rest else kwargs.get("p", 0.5)
            train = rest[1] if len(rest) > 1 else kwargs.get("train", True)
            return self._each(self._BUILTINS[func], x, p, train, self._next())
        if func is _ORIGINAL_SDPA or (func in draws.EAGER and kwargs.get("generator") is None):
            raise NotImplementedError("the sync oracle covers the dropout family, not "
                                      f"{getattr(func, '__name__', func)}")
        return super().__torch_function__(func, types, args, kwargs)


def sync_step(model: nn.Module, norms: dict[_BatchNorm, int], batch: dict, seed: int,
              step: int, bounds: list[tuple[int, int]], batch_size: int) -> float:
    """sync: one step's forward and backward of the whole batch; returns its summed loss."""
    sizes = [hi - lo for lo, hi in bounds]
    part = {k: v[bounds[0][0]:bounds[-1][1]] for k, v in batch.items()}
    with grouped_norms(model, norms, sizes), SplitDropout(seed, step, sizes):
        _, loss = model(part)
    (loss / batch_size).backward()
    return float(loss.detach())
