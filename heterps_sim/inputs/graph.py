"""Building blocks of the model zoo: a small DAG builder that flattens a model into a chain.

A model is written as a DAG of named per-sample tensors (`GraphBuilder`): each node consumes
tensors made earlier and makes new ones. `ModelGraph.to_spec()` flattens it, in node order, into
the chain of `Layer`s the schedulers see, computing each boundary's bytes from tensor liveness:
`output_bytes` of node i = every tensor made at or before i that a later node still reads
(`inputs/zoo.py`'s docstring states the rule and the FLOP conventions). The graph keeps what `Layer`
cannot hold (Linear shapes, table sizes, which tensors flow where), for tests and heterps_exec.
No torch, no simpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from heterps_sim.core.spec import BYTES_PER_FLOAT32, Layer, ModelSpec

F32 = BYTES_PER_FLOAT32
ID_BYTES = 8
"""A sparse id is an int64."""
LOSS_FLOPS_PER_LOGIT = (8.0, 4.0)
"""(forward, backward) FLOPs per logit of a loss (sigmoid/softmax, log, compare): rough."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """One layer of a model DAG, before flattening."""

    name: str
    kind: str
    """A `spec.LAYER_KINDS` entry."""
    op: str
    """What it computes: input, linear, embedding, concat, dot_interaction, scores, add, loss."""
    consumes: tuple[str, ...]
    produces: tuple[str, ...]
    forward_flops: float
    backward_flops: float
    param_bytes: float = 0.0
    table_rows: int = 0
    table_dim: int = 0
    lookups_per_sample: int = 0
    attrs: dict = field(default_factory=dict)
    """Op details: linear {in_features, out_features, activation, count, input_grad};
    embedding {tables, dim, bags, pooling}; loss {loss, num_logits}; ..."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelGraph:
    """A model as a DAG in pipeline order; node 0 reads the raw sample."""

    name: str
    source: str
    raw: tuple[tuple[str, float], ...]
    """Raw per-sample tensors (name, bytes) read from storage by node 0."""
    tensor_bytes: dict[str, float]
    nodes: tuple[Node, ...]
    tensor_grad: dict[str, bool] = field(default_factory=dict)
    """Whether a tensor carries a gradient backward (raw ids, labels and features do not)."""

    @property
    def raw_bytes(self) -> float:
        return float(sum(b for _, b in self.raw))

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"model {self.name!r} has no layer {name!r}")

    def live_after(self, i: int) -> tuple[str, ...]:
        """Tensors a pipeline cut after node i must ship (made at <= i, read after i)."""
        made = {t: 0 for t, _ in self.raw}
        last = {}
        for j, n in enumerate(self.nodes):
            for t in n.produces:
                made.setdefault(t, j)
            for t in n.consumes:
                last[t] = j
        return tuple(t for t in self.tensor_bytes if made[t] <= i < last.get(t, -1))

    def to_spec(self) -> ModelSpec:
        layers, prev = [], self.raw_bytes
        for i, n in enumerate(self.nodes):
            live = self.live_after(i)
            out = float(sum(self.tensor_bytes[t] for t in live))
            grad = float(sum(self.tensor_bytes[t] for t in live if self.tensor_grad.get(t, True)))
            layers.append(Layer(
                name=n.name, kind=n.kind, forward_flops=n.forward_flops,
                backward_flops=n.backward_flops, param_bytes=n.param_bytes,
                table_rows=n.table_rows, table_dim=n.table_dim,
                lookups_per_sample=n.lookups_per_sample, input_bytes=prev, output_bytes=out,
                output_grad_bytes=grad, reads_raw_input=(i == 0)))
            prev = out
        return ModelSpec(name=self.name, layers=tuple(layers), source=self.source)


class GraphBuilder:
    """Writes a ModelGraph node by node; each method returns the name of the tensor it makes.

    Tensor sizes are tracked, so a layer's input width is derived from what it reads, and whether
    a tensor carries gradient (raw data does not) sets a Linear's backward FLOPs.
    """

    def __init__(self, name: str, source: str) -> None:
        self.name, self.source = name, source
        self._bytes: dict[str, float] = {}
        self._grad: dict[str, bool] = {}
        self._raw: list[tuple[str, float]] = []
        self._nodes: list[Node] = []

    # -- tensors -------------------------------------------------------------------------
    def raw(self, **tensor_bytes: float) -> None:
        """Declare raw per-sample tensors (no gradient): dense features, ids, labels."""
        for t, b in tensor_bytes.items():
            self._new_tensor(t, float(b), grad=False)
            self._raw.append((t, float(b)))

    def width(self, tensors: str | Sequence[str]) -> int:
        """fp32 elements per sample in `tensors`."""
        return int(sum(self._bytes[t] for t in _names(tensors)) // F32)

    def _new_tensor(self, t: str, nbytes: float, *, grad: bool) -> None:
        if t in self._bytes:
            raise ValueError(f"model {self.name!r}: tensor {t!r} made twice")
        self._bytes[t], self._grad[t] = nbytes, grad

    def _add(self, name: str, kind: str, op: str, src: Sequence[str], out: dict[str, float],
             fwd: float, bwd: float, grad: bool = True, **extra) -> str:
        for t in src:
            if t not in self._bytes:
                raise ValueError(f"model {self.name!r}: layer {name!r} reads unknown tensor {t!r}")
        for t, b in out.items():
            self._new_tensor(t, b, grad=grad)
        self._nodes.append(Node(name=name, kind=kind, op=op, consumes=tuple(src),
                                produces=tuple(out), forward_flops=float(fwd),
                                backward_flops=float(bwd), **extra))
        return next(iter(out), "")

    # -- layers --------------------------------------------------------------------------
    def input(self, name: str = "input") -> None:
        """The layer that reads the raw sample from storage and hands it on (no FLOPs)."""
        self._nodes.append(Node(name=name, kind="input", op="input", consumes=(),
                                produces=tuple(t for t, _ in self._raw),
                                forward_flops=0.0, backward_flops=0.0))

    def linear(self, name: str, src: str | Sequence[str], out_features: int, *,
               activation: str | None = "relu", count: int = 1,
               loss_label: str | None = None) -> str:
        """nn.Linear(in, out) (+ activation), applied `count` times per sample (shared weights).

        Forward 2*in*out, backward 4*in*out (grad input + grad weight) or 2*in*out when no input
        carries gradient (raw features); bias adds and activations are not counted (as torch's
        FlopCounterMode). Params (in*out + out) x 4 bytes. With `loss_label` the layer also
        takes sigmoid + BCE against that tensor and keeps no output (a one-layer model; the
        loss FLOPs are left out).
        """
        src = _names(src)
        total_in = self.width(src)
        if total_in % count:
            raise ValueError(f"layer {name!r}: input width {total_in} not divisible by {count}")
        n_in = total_in // count
        input_grad = any(self._grad[t] for t in src)
        mm = count * n_in * out_features
        out = {} if loss_label else {name: count * out_features * F32}
        self._add(
            name, "dense", "linear", src + ([loss_label] if loss_label else []), out, 2 * mm,
            (4 if input_grad else 2) * mm, param_bytes=float((n_in + 1) * out_features * F32),
            attrs={"in_features": n_in, "out_features": out_features,
                   "activation": activation, "count": count, "input_grad": input_grad,
                   "loss": loss_label and "bce"})
        return name

    def mlp(self, prefix: str, src: str | Sequence[str], widths: Sequence[int], *,
            activation: str | None = "relu", start: int = 0) -> str:
        """Linear layers `prefix_{start}`, `prefix_{start+1}`, ...; returns the last output."""
        x = src
        for k, w in enumerate(widths):
            x = self.linear(f"{prefix}_{start + k}", x, w, activation=activation)
        return x

    def embedding(self, name: str, ids: Sequence[str], *, rows: int | Sequence[int], dim: int,
                  bags: int | None = None, extra_lookups: int = 0, pooling: str = "sum",
                  outputs: Sequence[str] | None = None) -> str:
        """Sparse lookups into tables held by the parameter server.

        lookups = ids read (8 bytes each) + `extra_lookups` (ids derived inside the layer, e.g.
        hashed crosses); `bags` output vectors of `dim` (default: one pooled vector per ids
        tensor). Forward = lookups*dim (pooling adds), backward = lookups*dim (scatter-add of
        row gradients). `outputs` names one tensor per ids tensor instead of one concatenation.
        """
        tables = (rows,) if isinstance(rows, int) else tuple(int(r) for r in rows)
        lookups = int(sum(self._bytes[t] for t in ids) // ID_BYTES) + extra_lookups
        bags = len(ids) if bags is None else bags
        if outputs is None:
            out = {name: bags * dim * F32}
        elif len(outputs) == len(ids) == bags:
            out = {o: dim * F32 for o in outputs}
        else:
            raise ValueError(f"layer {name!r}: one output per ids tensor, one bag each")
        self._add(name, "embedding", "embedding", ids, out, lookups * dim, lookups * dim,
                  table_rows=sum(tables), table_dim=dim, lookups_per_sample=lookups,
                  attrs={"tables": tables, "dim": dim, "bags": bags, "pooling": pooling})
        return next(iter(out))

    def concat(self, name: str, src: Sequence[str]) -> str:
        """Concatenation: moves bytes, no FLOPs."""
        return self._add(name, "interaction", "concat", src, {name: self.width(src) * F32}, 0, 0)

    def dot_interaction(self, name: str, dense: str, embs: Sequence[str], dim: int) -> str:
        """DLRM's dot interaction over F = 1 + len(embs) vectors of `dim`: the F(F-1)/2 pairwise
        dot products (2*dim FLOPs each; backward twice that), concatenated with `dense`."""
        f = self.width([dense, *embs]) // dim
        pairs = f * (f - 1) // 2
        return self._add(name, "interaction", "dot_interaction", [dense, *embs],
                         {name: (pairs + dim) * F32}, pairs * 2 * dim, 2 * pairs * 2 * dim,
                         attrs={"num_vectors": f, "dim": dim, "self_interaction": False})

    def scores(self, name: str, query: str, keys: str, dim: int, *, op: str = "dot",
               bias: str | None = None) -> str:
        """One score per key vector against the query: dot (2*dim FLOPs) or cosine (6*dim:
        dot + two norms), + 1 per bias; backward twice the forward."""
        k = self.width(keys) // dim
        per = {"dot": 2 * dim, "cosine": 6 * dim}[op] + (1 if bias else 0)
        src = [query, keys] + ([bias] if bias else [])
        return self._add(name, "interaction", "scores", src, {name: k * F32}, k * per, 2 * k * per,
                         attrs={"op": op, "num_keys": k, "dim": dim})

    def add(self, name: str, src: Sequence[str]) -> str:
        """Elementwise sum of equally wide tensors."""
        w = self.width(src[0])
        return self._add(name, "interaction", "add", src, {name: w * F32},
                         (len(src) - 1) * w, 0, attrs={"width": w})

    def loss(self, name: str, logits: str, *, label: str | None, loss: str = "bce") -> None:
        """The final layer: bce (sigmoid + BCE), softmax_ce or hinge; a few FLOPs per logit."""
        n = self.width(logits)
        fwd, bwd = LOSS_FLOPS_PER_LOGIT
        self._add(name, "loss", "loss", [logits] + ([label] if label else []), {},
                  n * fwd, n * bwd, attrs={"loss": loss, "num_logits": n})

    # -- result --------------------------------------------------------------------------
    def build(self) -> ModelGraph:
        """Check that every tensor is read after it is made, then freeze."""
        raw = {t for t, _ in self._raw}
        made, last = dict.fromkeys(raw, 0), {}
        for i, n in enumerate(self._nodes):
            for t in n.consumes:
                if not (made.get(t, i) < i or (t in raw and i == 0)):
                    raise ValueError(
                        f"model {self.name!r}: {n.name!r} reads {t!r} before it exists")
                last[t] = i
            for t in n.produces:
                made.setdefault(t, i)
        unused = [t for t in self._bytes if not (t in last and (last[t] > made[t] or t in raw))]
        if unused:
            raise ValueError(f"model {self.name!r}: tensors never read: {unused}")
        return ModelGraph(name=self.name, source=self.source, raw=tuple(self._raw),
                          tensor_bytes=dict(self._bytes), nodes=tuple(self._nodes),
                          tensor_grad=dict(self._grad))


def _names(tensors: str | Sequence[str]) -> list[str]:
    return [tensors] if isinstance(tensors, str) else list(tensors)
