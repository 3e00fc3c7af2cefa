"""A model written in the scenario YAML as a list of the zoo's building blocks; no code.

    model:
      name: my-ctr
      layers:
        - {type: input, dense: 13, sparse: {C1: 1, C2: 1, tags: 20}}
        - {type: embedding, name: emb, ids: [C1, C2, tags], rows: [1000, 5000, 20000], dim: 16}
        - {type: concat, name: concat, from: [emb, dense]}
        - {type: mlp, name: fc, widths: [64, 32, 1], last_activation: none}
        - {type: loss, loss: bce}

Each entry becomes one layer (an `mlp` one layer per width, named `<name>_0`, `<name>_1`, ...)
through `inputs/graph.GraphBuilder`, the builder the zoo's models use, so a YAML model gets
the same FLOPs, parameter bytes, table sizes and cut bytes as the zoo model it spells out, and
the engine trains it with the same torch modules. Tensors are named: the input's raw tensors
(`dense`, one per sparse slot, `label`), then each layer's output under the layer's name (an
`mlp` also answers to its own name, meaning its last layer). `from` defaults to the previous
entry's output. Validation is pydantic (`extra="forbid"`, the `type` field picks the entry's
model) plus the graph's own checks, every problem one line naming `model.layers.<k>`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from heterps_sim.core.files import UserFileError
from heterps_sim.inputs.graph import F32, ID_BYTES, GraphBuilder, ModelGraph

Name = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64,
                            description="A Python identifier (it names a torch module).")]
Count = Annotated[int, Field(gt=0)]
Activation = Literal["relu", "tanh", "none"]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class InputLayer(_Entry):
    """The raw sample and the layer that reads it: dense features, sparse id slots, a label."""

    type: Literal["input"]
    name: Name = "input"
    dense: int = Field(default=0, ge=0, description="Dense float features per sample (tensor `dense`).")
    sparse: dict[Name, Count] = Field(
        default_factory=dict, description="Sparse slots: name -> ids per sample (int64 each).")
    label: Literal["float32", "int64", "none"] = Field(
        default="float32", description="Tensor `label`: float32 (bce), int64 (a class index for "
        "softmax_ce) or none (losses that need no label: hinge, negative sampling).")


class EmbeddingLayer(_Entry):
    """Lookups of sparse slots in tables held by the parameter server."""

    type: Literal["embedding"]
    name: Name
    ids: list[Name] = Field(min_length=1, description="Sparse slots read (input names).")
    rows: Count | list[Count] = Field(
        description="Rows of one table shared by every slot, or one table per slot.")
    dim: Count
    pooling: Literal["sum", "mean", "none"] = Field(
        default="sum", description="Per slot, sum or mean of its ids' rows; none: one vector per id.")
    merge: Literal["concat", "sum"] = Field(
        default="concat", description="Pooled slots side by side (concat) or added (sum).")
    cross_rows: Count | None = Field(
        default=None, description="Add hashed pairwise crosses of the slots' first ids, looked "
        "up in a table of this many rows (Wide & Deep's wide part); needs merge: sum.")
    outputs: list[Name] | None = Field(
        default=None, description="One output tensor per slot (instead of one tensor `name`).")


class LinearLayer(_Entry):
    type: Literal["linear"]
    name: Name
    src: Name | list[Name] | None = Field(default=None, alias="from",
                                          description="Input tensor(s); default: the previous output.")
    width: Count = Field(description="Output features.")
    activation: Activation = "relu"
    count: Count = Field(default=1, description="Apply the same weights to this many equal "
                         "slices of the input (a tower shared by several items).")


class MlpLayer(_Entry):
    """Linear layers `<name>_0`, `<name>_1`, ..., one per width."""

    type: Literal["mlp"]
    name: Name
    src: Name | list[Name] | None = Field(default=None, alias="from")
    widths: list[Count] = Field(min_length=1)
    activation: Activation = "relu"
    last_activation: Activation | None = Field(
        default=None, description="Of the last layer (default: `activation`); none for a logit.")


class ConcatLayer(_Entry):
    type: Literal["concat"]
    name: Name
    src: list[Name] = Field(alias="from", min_length=1)


class AddLayer(_Entry):
    """Elementwise sum of equally wide tensors (logits of parallel branches)."""

    type: Literal["add"]
    name: Name
    src: list[Name] = Field(alias="from", min_length=2)


class DotInteractionLayer(_Entry):
    """DLRM's pairwise dot products of the dense vector and the embeddings, after the dense."""

    type: Literal["dot_interaction"]
    name: Name
    dense: Name
    src: list[Name] = Field(alias="from", min_length=1, description="Embedding outputs.")
    dim: Count | None = Field(default=None, description="Vector width (default: the dense width).")


class ScoresLayer(_Entry):
    """One score per key vector against the query (two towers, negative sampling)."""

    type: Literal["scores"]
    name: Name
    query: Name
    keys: Name
    dim: Count
    op: Literal["dot", "cosine"] = "dot"
    bias: Name | None = None


class LossLayer(_Entry):
    """The last layer; it reads the input's `label` when the input declares one."""

    type: Literal["loss"]
    name: Name = "loss"
    src: Name | None = Field(default=None, alias="from", description="Logits; default: the previous output.")
    loss: Literal["bce", "softmax_ce", "hinge"] = "bce"


YamlLayer = Annotated[
    InputLayer | EmbeddingLayer | LinearLayer | MlpLayer | ConcatLayer | AddLayer
    | DotInteractionLayer | ScoresLayer | LossLayer,
    Field(discriminator="type")]
"""One entry of `model.layers`."""


class LayerModelError(UserFileError):
    """A layer list that does not make a model; one line naming `model.layers.<k>`."""


class _Writer:
    """Feeds the entries to a GraphBuilder, checking what the builder would trip over."""

    def __init__(self, name: str, source: str) -> None:
        self.b = GraphBuilder(name, source)
        self.alias: dict[str, str] = {}
        self.previous: str | None = None
        self.has_label = False

    def tensor(self, ref: str) -> str:
        t = self.alias.get(ref, ref)
        if t not in self.b._bytes:
            known = ", ".join([*self.b._bytes, *self.alias]) or "none yet"
            raise ValueError(f"reads unknown tensor {ref!r} (known so far: {known})")
        return t

    def source_of(self, src) -> list[str]:
        if src is None:
            if self.previous is None:
                raise ValueError("needs `from`: the previous entry makes no single tensor")
            return [self.previous]
        return [self.tensor(s) for s in ([src] if isinstance(src, str) else src)]

    def add(self, e) -> None:
        getattr(self, f"_{e.type}")(e)

    def _input(self, e: InputLayer) -> None:
        raw = {"dense": e.dense * F32} if e.dense else {}
        raw.update({slot: n * ID_BYTES for slot, n in e.sparse.items()})
        if e.label != "none":
            raw["label"] = ID_BYTES if e.label == "int64" else F32
            self.has_label = True
        if len(raw) < len(e.sparse) + (e.dense > 0) + self.has_label:
            raise ValueError("a sparse slot may not be named 'dense' or 'label'")
        if not raw:
            raise ValueError("declares no raw tensor (give dense, sparse or a label)")
        self.b.raw(**raw)
        self.b.input(e.name)
        self.previous = None

    def _embedding(self, e: EmbeddingLayer) -> None:
        ids = [self.tensor(s) for s in e.ids]
        rows = (e.rows,) if isinstance(e.rows, int) else tuple(e.rows)
        if len(rows) not in (1, len(ids)):
            raise ValueError(f"rows: give one table (shared) or one per slot ({len(ids)}), "
                             f"got {len(rows)}")
        if e.cross_rows is not None and e.merge != "sum":
            raise ValueError("cross_rows needs merge: sum (crosses add to the pooled sum)")
        if e.outputs is not None and (e.pooling == "none" or e.merge != "concat"
                                      or len(e.outputs) != len(ids)):
            raise ValueError("outputs: one name per slot, with pooling sum/mean and merge concat")
        lookups = int(sum(self.b._bytes[t] for t in ids) // ID_BYTES)
        bags = lookups if e.pooling == "none" else 1 if e.merge == "sum" else len(ids)
        crosses = 0
        if e.cross_rows is not None:
            rows, crosses = rows + (e.cross_rows,), len(ids) * (len(ids) - 1) // 2
            if len(rows) != len(ids) + 1:
                raise ValueError("cross_rows needs one table per slot in rows")
        self.previous = self.b.embedding(e.name, ids, rows=rows, dim=e.dim, bags=bags,
                                         extra_lookups=crosses, pooling=e.pooling,
                                         outputs=e.outputs)
        if e.outputs is not None:
            self.previous = None

    def _linear(self, e: LinearLayer) -> None:
        src = self.source_of(e.src)
        self._check_slices(src, e.count)
        self.previous = self.b.linear(e.name, src, e.width,
                                      activation=_act(e.activation), count=e.count)

    def _mlp(self, e: MlpLayer) -> None:
        x = self.source_of(e.src)
        if e.name in self.b._bytes or e.name in self.alias:
            raise ValueError(f"name {e.name!r} is already a tensor")
        last = e.activation if e.last_activation is None else e.last_activation
        for k, w in enumerate(e.widths):
            act = last if k == len(e.widths) - 1 else e.activation
            x = self.b.linear(f"{e.name}_{k}", x, w, activation=_act(act))
        self.alias[e.name] = self.previous = x

    def _concat(self, e: ConcatLayer) -> None:
        self.previous = self.b.concat(e.name, self.source_of(e.src))

    def _add(self, e: AddLayer) -> None:
        src = self.source_of(e.src)
        widths = {self.b.width(t) for t in src}
        if len(widths) > 1:
            raise ValueError(f"adds tensors of different widths {sorted(widths)}")
        self.previous = self.b.add(e.name, src)

    def _dot_interaction(self, e: DotInteractionLayer) -> None:
        dense, embs = self.tensor(e.dense), self.source_of(e.src)
        dim = e.dim or self.b.width(dense)
        for t in [dense, *embs]:
            if self.b.width(t) % dim:
                raise ValueError(f"tensor {t!r} is {self.b.width(t)} wide, not a multiple of "
                                 f"dim {dim}")
        self.previous = self.b.dot_interaction(e.name, dense, embs, dim)

    def _scores(self, e: ScoresLayer) -> None:
        query, keys = self.tensor(e.query), self.tensor(e.keys)
        bias = None if e.bias is None else self.tensor(e.bias)
        k, rest = divmod(self.b.width(keys), e.dim)
        if rest or self.b.width(query) != e.dim:
            raise ValueError(f"query must be dim {e.dim} wide and keys a multiple of it; got "
                             f"{self.b.width(query)} and {self.b.width(keys)}")
        if bias is not None and self.b.width(bias) != k:
            raise ValueError(f"bias must hold one value per key ({k}), got {self.b.width(bias)}")
        self.previous = self.b.scores(e.name, query, keys, e.dim, op=e.op, bias=bias)

    def _loss(self, e: LossLayer) -> None:
        logits = self.source_of(e.src)
        if len(logits) != 1:
            raise ValueError("from: the loss reads one logits tensor")
        self.b.loss(e.name, logits[0], label="label" if self.has_label else None, loss=e.loss)
        self.previous = None

    def _check_slices(self, src: list[str], count: int) -> None:
        width = self.b.width(src)
        if width % count:
            raise ValueError(f"input width {width} does not split into count={count} slices")


def _act(name: str) -> str | None:
    return None if name == "none" else name


def layer_graph(name: str, layers: list, source: str = "<scenario>") -> ModelGraph:
    """The ModelGraph of a validated `model.layers` list; LayerModelError names the entry."""
    if not layers or layers[0].type != "input":
        raise LayerModelError(f"{source}: model.layers.0: the first entry must be "
                              "{type: input, ...} (the raw sample)")
    if layers[-1].type != "loss":
        raise LayerModelError(f"{source}: model.layers.{len(layers) - 1}: the last entry must "
                              "be {type: loss, ...}")
    w = _Writer(name, f"layers in YAML ({source})")
    for k, entry in enumerate(layers):
        where = f"{source}: model.layers.{k} ({entry.type} {entry.name!r})"
        if k and entry.type == "input":
            raise LayerModelError(f"{where}: only the first entry is the input")
        if entry.type == "loss" and k != len(layers) - 1:
            raise LayerModelError(f"{where}: the loss must be the last entry")
        try:
            w.add(entry)
        except (ValueError, KeyError) as exc:
            raise LayerModelError(f"{where}: {exc.args[0]}") from None
    try:
        return w.b.build()
    except ValueError as exc:
        raise LayerModelError(f"{source}: model.layers: {exc}") from None
