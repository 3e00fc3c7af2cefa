"""Random masks seeded per (seed, step, microbatch, call): the same mask whichever rank runs it.

    seed_graph(stage_gm)                        # a stage's random nodes -> seeded versions
    with microbatch(seed, step, mu):            # the engine, around one microbatch's forward
        stage(env)
    with microbatch(seed, step, mu), EagerDropout():   # the oracle, around the eager module
        model(env)

A captured model's random operations draw from the global generator of whichever rank runs
them, so a pipelined or replicated run cannot equal one process. Here each call takes its
mask from a fresh `torch.Generator` seeded by the run's seed, the step, the microbatch's
index in the step (0..m-1) and the call's ordinal among the model's random calls
(`tag_dropouts` numbers the captured graph's random nodes in order, which is the order the
eager forward makes the calls). The random operations covered:

    nn.Dropout, F.dropout                    aten.dropout              elementwise mask
    nn.Dropout1d/2d/3d, F.dropout1d/2d/3d    aten.feature_dropout      one mask per (sample, channel)
    nn.AlphaDropout, F.alpha_dropout         aten.alpha_dropout        SELU-preserving mask
    nn.FeatureAlphaDropout                   aten.feature_alpha_dropout  per (sample, channel)
    F.scaled_dot_product_attention(dropout_p > 0), nn.MultiheadAttention(dropout > 0)
                                             aten.scaled_dot_product_attention / aten.dropout
    nn.Dropout(inplace=True), F.dropout(x, p, training, inplace=True), and the same of
    the others                               aten.dropout_ & co.       the same mask, in place
    torch.rand(_like), torch.randn(_like), torch.bernoulli           draws.py

The masks follow ATen's own arithmetic (Dropout.cpp: bernoulli(1 - p), then / (1 - p), or
alpha dropout's affine correction); attention with dropout runs the mathematical form
softmax(q k^T * scale + bias) with the seeded mask, then @ v. Replicas of a stage draw
different masks for different microbatches; a rank never touches the global generator. A
model with no random node does no RNG work (no node is rewritten). Outside `microbatch`
(profiling, scoring) every call is torch's own.

The oracle sees the calls the eager module makes: top-level calls through a TorchFunctionMode
(`torch.dropout`, attention imported by name), and calls made inside torch's own functions
(F.dropout2d -> _VF.feature_dropout, nn.MultiheadAttention -> F's scaled_dot_product_attention
and dropout) by swapping `torch._VF`'s dropout functions and F.scaled_dot_product_attention
while it is active. Knowingly left out: in-place fills (uniform_, normal_, bernoulli_),
randint, randperm, multinomial and F.rrelu; `unseeded_call` names the first one a model makes,
and the engine refuses it (user_model.run_entry).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
from torch import fx
from torch.nn import functional as nnf
from torch.overrides import TorchFunctionMode

from heterps_exec.model import draws
from heterps_exec.model.seeding import (  # mask_seed, microbatch: imported from here too
    active,
    generator,
    mask_seed,  # noqa: F401
    microbatch,  # noqa: F401
)

_aten = torch.ops.aten
SDPA = _aten.scaled_dot_product_attention.default
LAYER = "heterps_dropout"
"""node.meta key: the random call's ordinal in the captured graph."""
ALPHA = 1.7580993408473766
"""SELU's alpha * scale: alpha dropout sets a dropped unit to -ALPHA before the correction."""


def _noise(x: torch.Tensor, shape, p: float, layer: int) -> torch.Tensor:
    gen = generator(x.device, layer)
    return torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(1 - p, generator=gen)


def _feature_shape(x: torch.Tensor) -> tuple[int, ...]:
    """ATen's feature noise: one draw per (sample, channel), broadcast over the rest."""
    return (x.shape[0], x.shape[1], *([1] * (x.dim() - 2)))


def _seeded(feature: bool, alpha: bool, fallback, inplace: bool = False):
    def call(x: torch.Tensor, p: float, train: bool, layer: int) -> torch.Tensor:
        if not train or p == 0 or x.numel() == 0:
            return x
        if not active():
            return fallback(x, p, train)
        if p == 1:
            return x.mul_(0) if inplace else x * 0
        noise = _noise(x, _feature_shape(x) if feature else x.shape, p, layer)
        if not alpha:
            noise.div_(1 - p)
            return x.mul_(noise) if inplace else x * noise
        a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
        b = noise.add(-1).mul_(ALPHA * a).add_(ALPHA * a * p)
        noise.mul_(a)
        return x.mul_(noise).add_(b) if inplace else x * noise + b
    return call


seeded_dropout = _seeded(False, False, torch.dropout)
"""F.dropout(x, p, train) with the mask of (the current microbatch, `layer`)."""
seeded_feature_dropout = _seeded(True, False, torch.feature_dropout)
seeded_alpha_dropout = _seeded(False, True, torch.alpha_dropout)
seeded_feature_alpha_dropout = _seeded(True, True, torch.feature_alpha_dropout)
seeded_dropout_ = _seeded(False, False, torch.dropout_, inplace=True)
"""F.dropout(x, p, train, inplace=True): the same mask, multiplied into x in place."""
seeded_feature_dropout_ = _seeded(True, False, torch.feature_dropout_, inplace=True)
seeded_alpha_dropout_ = _seeded(False, True, torch.alpha_dropout_, inplace=True)
seeded_feature_alpha_dropout_ = _seeded(True, True, torch.feature_alpha_dropout_, inplace=True)
_ORIGINAL_SDPA = nnf.scaled_dot_product_attention


def seeded_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, layer=0, *,
                     scale=None, enable_gqa=False):
    """scaled_dot_product_attention with its attention-weight dropout seeded by `layer`."""
    if dropout_p == 0 or not active():
        return _ORIGINAL_SDPA(q, k, v, attn_mask, dropout_p, is_causal, scale=scale,
                              enable_gqa=enable_gqa)
    if enable_gqa:
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    w = q @ k.transpose(-2, -1) * scale
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        w = w.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        w = w.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else w + attn_mask
    w = torch.softmax(w, dim=-1)
    return seeded_dropout(w, dropout_p, True, layer) @ v


GRAPH_OPS = {_aten.dropout.default: seeded_dropout,
             _aten.feature_dropout.default: seeded_feature_dropout,
             _aten.alpha_dropout.default: seeded_alpha_dropout,
             _aten.feature_alpha_dropout.default: seeded_feature_alpha_dropout,
             _aten.dropout_.default: seeded_dropout_,
             _aten.feature_dropout_.default: seeded_feature_dropout_,
             _aten.alpha_dropout_.default: seeded_alpha_dropout_,
             _aten.feature_alpha_dropout_.default: seeded_feature_alpha_dropout_}
"""Captured random ops (x, p, train) and their seeded versions (x, p, train, layer)."""
DROPOUT_OPS = tuple(GRAPH_OPS)


def _random(n: fx.Node) -> bool:
    if n.op != "call_function":
        return False
    if n.target in GRAPH_OPS or n.target in draws.GRAPH:
        return True
    if n.target is SDPA:  # only with a dropout (MultiheadAttention passes 0 in eval)
        p = n.args[4] if len(n.args) > 4 else n.kwargs.get("dropout_p", 0.0)
        return not (isinstance(p, int | float) and p == 0)
    return False


def tag_dropouts(gm: fx.GraphModule) -> int:
    """Number the captured graph's random nodes in order (node.meta); returns how many."""
    count = 0
    for n in gm.graph.nodes:
        if _random(n):
            n.meta[LAYER] = count
            count += 1
    return count


def seed_graph(gm: fx.GraphModule) -> int:
    """Make the tagged random nodes of a stage's graph call their seeded versions; returns
    how many."""
    count = 0
    for n in gm.graph.nodes:
        if LAYER not in n.meta or not _random(n):
            continue
        if n.target is SDPA:
            q, k, v, mask, p, causal = (list(n.args) + [None, 0.0, False])[:6]
            n.target, n.args = seeded_attention, (q, k, v, mask, p, causal, n.meta[LAYER])
            n.kwargs = {k2: n.kwargs[k2] for k2 in ("scale", "enable_gqa") if k2 in n.kwargs}
        elif n.target in draws.GRAPH:
            draws.graph_call(n, n.meta[LAYER])
        else:
            x, p, train = (list(n.args) + [None] * 3)[:3]
            n.target = GRAPH_OPS[n.target]
            n.args, n.kwargs = (x, p, train, n.meta[LAYER]), {}
        count += 1
    if count:
        gm.recompile()
    return count


class EagerDropout(TorchFunctionMode):
    """The eager module's random calls, numbered in call order from 0 at entry, drawing the
    seeded versions' masks: the oracle's masks are the engine's."""

    _VF_NAMES = {"dropout": seeded_dropout, "feature_dropout": seeded_feature_dropout,
                 "alpha_dropout": seeded_alpha_dropout,
                 "feature_alpha_dropout": seeded_feature_alpha_dropout,
                 "dropout_": seeded_dropout_, "feature_dropout_": seeded_feature_dropout_,
                 "alpha_dropout_": seeded_alpha_dropout_,
                 "feature_alpha_dropout_": seeded_feature_alpha_dropout_}
    _BUILTINS = {getattr(torch, name): fn for name, fn in _VF_NAMES.items()}

    def __enter__(self):
        self.count = 0
        vf = torch._VF
        self._swapped = [(vf, name, vf.__dict__.get(name)) for name in self._VF_NAMES]
        self._swapped.append((nnf, "scaled_dot_product_attention", _ORIGINAL_SDPA))
        for name, fn in self._VF_NAMES.items():  # F.dropout2d -> _VF.feature_dropout, ...
            setattr(vf, name, self._counted(fn))
        nnf.scaled_dot_product_attention = self._attention  # MultiheadAttention's global
        return super().__enter__()

    def __exit__(self, *exc):
        for owner, name, before in self._swapped:
            if before is None:
                owner.__dict__.pop(name, None)  # back to torch._VF's __getattr__
            else:
                setattr(owner, name, before)
        return super().__exit__(*exc)

    def _next(self) -> int:
        self.count += 1
        return self.count - 1

    def _counted(self, fn):
        def call(x, p=0.5, train=True):
            return fn(x, p, train, self._next())
        return call

    def _attention(self, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
        layer = self._next() if dropout_p != 0 else 0
        return seeded_attention(q, k, v, attn_mask, dropout_p, is_causal, layer, scale=scale,
                                enable_gqa=enable_gqa)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self._BUILTINS:  # torch.dropout(x, p, train) called directly
            x, *rest = args
            p = rest[0] if rest else kwargs.get("p", 0.5)
            train = rest[1] if len(rest) > 1 else kwargs.get("train", True)
            return self._BUILTINS[func](x, p, train, self._next())
        if func is _ORIGINAL_SDPA:  # imported by name before the swap
            return self._attention(*args, **kwargs)
        if func in draws.EAGER and kwargs.get("generator") is None:  # torch.rand_like & co.
            return draws.EAGER[func](args, kwargs, self._next())
        return func(*args, **kwargs)  # F.dropout & co. reach the swapped _VF functions


def unseeded_call(gm: fx.GraphModule, scenario: str) -> str:
    """"" when every random node of the captured graph is seeded here; else one line naming
    the first other one, its module and its line (the engine cannot make it equal one
    process)."""
    n = draws.unseeded(gm, _random)
    if n is None:
        return ""
    stack = n.meta.get("nn_module_stack") or {}
    path = next(reversed(stack.values()))[0] if stack else ""
    lines = re.findall(r'File "([^"]+)", line (\d+)', n.meta.get("stack_trace") or "")
    user = [f"{Path(f).name}:{line}" for f, line in lines if "/torch/" not in f]
    where = f"module {path or '(root)'}" + (f" ({user[-1]})" if user else "")
    op = str(n.target).removeprefix("aten.").removesuffix(".default")
    return (f"{scenario}: model.module: {where} calls {op}, a random draw the engine cannot "
            "seed per microbatch, so a pipelined run would not equal one process; use "
            "dropout, torch.rand_like, torch.randn_like or torch.bernoulli (seeded: "
            "docs/guide/your-model.md)")
