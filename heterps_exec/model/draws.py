"""Random tensors a forward makes, seeded per (seed, step, microbatch, call) as dropout is.

    noise = torch.rand_like(h)                       # aten.rand_like   -> seeded_rand_like
    mask = torch.bernoulli(torch.full_like(h, 0.7))  # aten.bernoulli   -> seeded_bernoulli
    h = h + torch.randn(h.shape[0], 4) * 0.1         # aten.randn       -> seeded_randn

Each seeded version takes the call's ordinal (`layer`, numbered with the dropouts by
dropout.tag_dropouts) and draws from that call's own generator (seeding.py), so the rank
that runs the call does not matter; outside a microbatch it is torch's own call. GRAPH
maps the captured ops to their seeded versions (graph arguments), EAGER the torch functions
the single-process oracle calls to adapters taking (args, kwargs, layer).

Covered: torch.rand, torch.randn, torch.rand_like, torch.randn_like, torch.bernoulli and
Tensor.bernoulli (a probability tensor, or a float p). Not covered (the engine refuses a model
whose graph holds one: `unseeded`): in-place fills (uniform_, normal_, bernoulli_), randint,
randperm, multinomial, F.rrelu, a generator passed by the model.
"""

from __future__ import annotations

import torch
from torch import fx

from heterps_exec.model.seeding import active, generator

_aten = torch.ops.aten


def _like(draw, fallback):
    def call(x: torch.Tensor, layer: int, *, dtype=None, device=None, **_ignored):
        if not active():
            return fallback(x, dtype=dtype, device=device)
        device = x.device if device is None else torch.device(device)
        return draw(x.shape, generator=generator(device, layer),
                    dtype=x.dtype if dtype is None else dtype, device=device)
    return call


def _sized(draw):
    def call(size, layer: int, *, dtype=None, device=None, **_ignored):
        device = torch.device("cpu") if device is None else torch.device(device)
        gen = generator(device, layer) if active() else None
        return draw(list(size), generator=gen, dtype=dtype, device=device)
    return call


seeded_rand_like = _like(torch.rand, torch.rand_like)
seeded_randn_like = _like(torch.randn, torch.randn_like)
seeded_rand = _sized(torch.rand)
seeded_randn = _sized(torch.randn)


def seeded_bernoulli(x: torch.Tensor, layer: int, p: float | None = None) -> torch.Tensor:
    """torch.bernoulli(x) (x the probabilities), or of probability p with x's shape."""
    gen = generator(x.device, layer) if active() else None
    return torch.bernoulli(x, generator=gen) if p is None else torch.bernoulli(x, p, generator=gen)


GRAPH = {_aten.rand_like.default: seeded_rand_like,
         _aten.randn_like.default: seeded_randn_like,
         _aten.rand.default: seeded_rand, _aten.randn.default: seeded_randn,
         _aten.bernoulli.default: seeded_bernoulli, _aten.bernoulli.p: seeded_bernoulli}
"""Captured draws and their seeded versions (the node's args, then layer, then kwargs)."""


def graph_call(n: fx.Node, layer: int) -> None:
    """Make node n (a GRAPH op) call its seeded version as call `layer`."""
    fn = GRAPH[n.target]
    first, *rest = n.args
    kwargs = {k: v for k, v in n.kwargs.items() if k in ("dtype", "device")}
    if fn is seeded_bernoulli:
        kwargs = {"p": rest[0]} if rest else {}
    n.target, n.args, n.kwargs = fn, (first, layer), kwargs


def _size(args) -> list:
    return list(args[0]) if len(args) == 1 and isinstance(args[0], list | tuple | torch.Size) \
        else list(args)


def _eager_bernoulli(args, kwargs, layer):
    x, *rest = args
    p = rest[0] if rest else kwargs.get("p")
    return seeded_bernoulli(x, layer, p)


EAGER = {torch.rand_like: lambda a, k, layer: seeded_rand_like(a[0], layer, **k),
         torch.randn_like: lambda a, k, layer: seeded_randn_like(a[0], layer, **k),
         torch.rand: lambda a, k, layer: seeded_rand(_size(a), layer, **k),
         torch.randn: lambda a, k, layer: seeded_randn(_size(a), layer, **k),
         torch.bernoulli: _eager_bernoulli, torch.Tensor.bernoulli: _eager_bernoulli}
"""The oracle's calls: torch function -> fn(args, kwargs, layer) (a call that passes its own
generator is left to torch)."""


def unseeded(gm: fx.GraphModule, seeded) -> fx.Node | None:
    """The first node of the graph that draws random numbers and is not `seeded(node)`."""
    for n in gm.graph.nodes:
        op = n.target
        if n.op == "call_function" and isinstance(op, torch._ops.OpOverload) and \
                torch.Tag.nondeterministic_seeded in op.tags and not seeded(n) and \
                op is not _aten.scaled_dot_product_attention.default:
            return n
    return None
