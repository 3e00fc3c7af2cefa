"""The scenario's `model:` section for a user's own PyTorch module (validated, no torch).

    model:
      module: my_models.deepfm:DeepFM          # importable "package.module:Factory"
      kwargs: {field_dims: [100, 200, 300], embed_dim: 16}
      inputs:
        - {name: ids, shape: [3], dtype: int64, cardinality: [100, 200, 300]}
      loss: bce                                  # bce | softmax_ce | mse | "pkg.mod:fn"
      output: probabilities                      # or logits; unset: detected from the graph
      layers: grouped                            # or leaf, or [submodule names] (coarser layers)
      split_points: []                           # or submodule names that start a new layer
      extra_loss: my_models.deepfm:l2            # fn(module) -> scalar, added once per step
      batchnorm: exact                           # or broadcast, sync: a replicated stage's BN

`columns` (instead of, or as well as, `inputs`) lists feature columns: the factory receives
them as objects (columns.FeatureColumn, or what `column_factory` makes of each), and without
`inputs` the model reads one float tensor `features` holding them in order, the sparse
columns' ids first (`id_columns`).

`inputs` are the positional arguments of the module's forward, per sample (the batch
dimension is added, and left dynamic, by the capture). Integer inputs draw ids below their
`cardinality` (one number, or one per last-dimension column); float inputs draw uniformly
from `range`, or standard normal without one. The label's shape follows from the loss and
the model's output.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
INT_DTYPES = ("int64", "int32", "bool")
BUILTIN_LOSSES = ("bce", "softmax_ce", "mse")
EXACT_FLOAT_IDS = {"float32": 1 << 24, "float64": 1 << 53, "float16": 1 << 11, "bfloat16": 1 << 8}
"""The most ids a float column can hold exactly (every id below it a whole number)."""
FEATURES = "features"
"""The input a model declared by `columns` alone reads."""
LENGTHS = "_lengths"
"""A bag input's raw tensor of per-sample lengths is named <input name> + this."""
WEIGHTS = "_weights"
"""A weighted bag's raw tensor of per-id weights (padded like its ids) is named <input name>
+ this."""
LABEL = "label"
"""The name of the label among the raw tensors (no input may use it)."""
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ModelInput(_Strict):
    """One positional input of the module's forward, per sample."""

    name: str = Field(pattern=r"^[A-Za-z_]\w*$")
    """A name for the raw tensor (the dataset's column)."""
    shape: list[int] = Field(default_factory=list)
    """Per-sample shape, without the batch dimension ([] for one number per sample)."""
    dtype: Literal["float32", "float64", "float16", "bfloat16", "int64", "int32", "bool"] = "float32"
    range: tuple[float, float] | None = None
    """Float inputs: example batches and synthetic data draw uniformly from [low, high)
    (default: standard normal); declare it for a float column that holds ids."""
    cardinality: int | list[int] | None = None
    """Integer inputs: ids lie in [0, cardinality); a list gives one bound per column of the
    last dimension (fields of different sizes, as in pytorch-fm's field_dims)."""
    id_columns: list[int] | None = None
    """Float inputs of shape [width]: the first len(id_columns) columns hold ids (whole
    numbers stored as floats, cast with .long() in forward), column k below id_columns[k];
    the other columns are dense features (standard normal, or inside `range`)."""
    bag: bool = False
    """Integer inputs of shape [max_len]: a multi-hot feature of 1..max_len ids per sample.
    forward receives TWO arguments for it, as nn.EmbeddingBag reads them: the batch's ids
    one sample after another (1-D) and each sample's offset into them; the data holds the
    ids padded to max_len and each sample's length (the raw tensor <name>_lengths)."""
    mean_length: float | None = Field(default=None, gt=0)
    """Bag inputs: the ids per sample the cost model counts (default: (1 + max_len) / 2, the
    mean of synthetic data's lengths)."""
    include_last_offset: bool = False
    """Bag inputs: the offsets forward receives have batch + 1 entries, the last the number
    of ids, as nn.EmbeddingBag(include_last_offset=True) reads them (default: batch entries,
    each sample's start)."""
    per_sample_weights: bool = False
    """Bag inputs: forward receives a THIRD argument after (ids, offsets): one float weight
    per id (1-D, beside the ids), as nn.EmbeddingBag(mode="sum") reads per_sample_weights.
    The data holds them padded like the ids (the raw tensor <name>_weights): synthetic data
    draws them uniformly in [0.5, 1.5), Parquet reads a list<float> column."""

    @field_validator("shape")
    @classmethod
    def _positive_dims(cls, shape):
        if any(d < 1 for d in shape):
            raise ValueError(f"every dimension must be >= 1, got {shape}")
        return shape

    @model_validator(mode="after")
    def _range_or_cardinality(self) -> ModelInput:
        if self.dtype in INT_DTYPES and self.dtype != "bool":
            if self.cardinality is None:
                raise ValueError(f"input {self.name!r}: an integer input needs a cardinality")
            bounds = self.cardinality if isinstance(self.cardinality, list) else [self.cardinality]
            if any(c < 1 for c in bounds):
                raise ValueError(f"input {self.name!r}: cardinality must be >= 1")
            if isinstance(self.cardinality, list) and (not self.shape or
                                                        self.shape[-1] != len(self.cardinality)):
                raise ValueError(f"input {self.name!r}: {len(self.cardinality)} cardinalities "
                                 f"need a last dimension of that size, shape is {self.shape}")
            if self.range is not None:
                raise ValueError(f"input {self.name!r}: range is for float inputs")
        elif self.cardinality is not None:
            raise ValueError(f"input {self.name!r}: cardinality is for integer inputs"
                             + ("; a float tensor holding ids declares id_columns"
                                if self.dtype in FLOAT_DTYPES else ""))
        if self.id_columns is not None:
            self._check_id_columns()
        if self.bag or self.mean_length is not None or self.include_last_offset or \
                self.per_sample_weights:
            self._check_bag()
        if self.range is not None and not self.range[0] < self.range[1]:
            raise ValueError(f"input {self.name!r}: range must be [low, high] with low < high")
        return self

    def _check_id_columns(self) -> None:
        where = f"input {self.name!r}: id_columns"
        if self.dtype not in FLOAT_DTYPES:
            raise ValueError(f"{where} are for float inputs (an integer input has a cardinality)")
        if len(self.shape) != 1 or not 1 <= len(self.id_columns) <= self.shape[0]:
            raise ValueError(f"{where} needs a shape [width] with width >= {len(self.id_columns)} "
                             f"(the id columns first), shape is {self.shape}")
        exact = EXACT_FLOAT_IDS[self.dtype]
        for k, c in enumerate(self.id_columns):
            if not 1 <= c <= exact:
                raise ValueError(f"{where}[{k}]: cardinality {c} outside [1, {exact}] (larger ids "
                                 f"are not whole numbers in {self.dtype})")

    def _check_bag(self) -> None:
        where = f"input {self.name!r}"
        if not self.bag:
            used = [f for f in ("mean_length", "include_last_offset", "per_sample_weights")
                    if getattr(self, f) not in (None, False)]
            raise ValueError(f"{where}: {used[0]} is for bag inputs (bag: true)")
        if self.dtype not in ("int64", "int32") or len(self.shape) != 1 or \
                isinstance(self.cardinality, list):
            raise ValueError(f"{where}: a bag is an integer input of shape [max_len] with one "
                             f"cardinality (got dtype {self.dtype}, shape {self.shape})")
        if self.mean_length is not None and self.mean_length > self.shape[0]:
            raise ValueError(f"{where}: mean_length {self.mean_length} is above max_len "
                             f"{self.shape[0]}")

    @property
    def width(self) -> int:
        """Numbers per sample."""
        out = 1
        for d in self.shape:
            out *= d
        return out


class ColumnSpec(_Strict):
    """One feature column, as the factory receives it (columns.FeatureColumn)."""

    name: str = Field(pattern=r"^[A-Za-z_]\w*$")
    """The feature's name."""
    kind: Literal["sparse", "dense"]
    """sparse: one id per sample, below `cardinality`; dense: `width` floats per sample."""
    cardinality: int | None = Field(default=None, ge=1)
    """Sparse columns: ids lie in [0, cardinality) (the vocabulary size)."""
    embed_dim: int | None = Field(default=None, ge=1)
    """Sparse columns: the embedding size the factory is asked for (None: its own choice)."""
    width: int = Field(default=1, ge=1)
    """Dense columns: numbers per sample."""

    @model_validator(mode="after")
    def _fits_kind(self) -> ColumnSpec:
        if self.kind == "sparse" and self.cardinality is None:
            raise ValueError(f"column {self.name!r}: a sparse column needs a cardinality")
        if self.kind == "sparse" and self.width != 1:
            raise ValueError(f"column {self.name!r}: a sparse column holds one id (width 1)")
        if self.kind == "dense" and (self.cardinality or self.embed_dim):
            raise ValueError(f"column {self.name!r}: cardinality and embed_dim are for sparse "
                             "columns")
        return self


class TorchModelSection(_Strict):
    """A user's PyTorch module, captured with torch.export into the layer chain."""

    module: str
    """"package.module:Factory": a class or function returning an nn.Module, importable from
    the Python path or from the scenario's folder."""
    kwargs: dict = Field(default_factory=dict)
    """Keyword arguments of the factory."""
    inputs: list[ModelInput] = Field(default_factory=list)
    """The forward's positional inputs, per sample (derived from `columns` when omitted)."""
    columns: list[ColumnSpec] = Field(default_factory=list)
    """Feature columns the factory receives (as `columns_arg`), in the order the input tensor
    holds them; without `inputs`, forward reads one float tensor "features" of them all,
    sparse columns first."""
    columns_arg: str = Field(default="columns", pattern=r"^[A-Za-z_]\w*$")
    """The factory's keyword argument that receives the columns."""
    column_factory: str | None = None
    """"pkg.mod:fn" making each column the object the factory expects (a library's own
    SparseFeat / DenseFeat) from a heterps FeatureColumn; unset: FeatureColumn as is."""
    extra_loss: str | None = None
    """"pkg.mod:fn": fn(module) returns a scalar added to the batch's mean loss once per step
    (a regularisation term: L2 on the embeddings), as a training loop adds it outside
    forward. Each of its terms must read the parameters of one stage only."""
    loss: str = "bce"
    """bce (sigmoid + binary cross-entropy on logits), softmax_ce (class index label), mse, or
    "pkg.mod:fn" taking (output, label) and returning the batch's mean loss."""
    output: Literal["logits", "probabilities"] | None = None
    """What forward returns for a binary label: logits (bce applies the sigmoid) or
    probabilities (forward ends in a sigmoid, as most public CTR code does: bce then takes
    the log of them directly). Unset: probabilities when the captured graph ends in a
    sigmoid, else logits. The held-out log-loss and AUC read the output the same way."""
    batchnorm: Literal["exact", "broadcast", "sync"] = "exact"
    """BatchNorm in a stage the plan replicates (heterps_exec/model/norm_rules.py): exact
    (its running statistics are single-process training's, whatever the layout), broadcast
    (DistributedDataParallel's broadcast_buffers: replica 0's buffers at every step start, so
    the statistics follow replica 0's microbatches), or sync (torch.nn.SyncBatchNorm's: the
    replicas normalise each round of k microbatches by the round's statistics). Training
    only: planning and the capture do not read it."""
    layers: Literal["grouped", "leaf"] | list[str] = "grouped"
    """Where layers begin and end: each Linear, Embedding or interaction block with the
    activation, norm and dropout after it ("grouped"), every leaf module ("leaf"), or these
    submodules as one layer each (other code grouped)."""
    split_points: list[str] = Field(default_factory=list)
    """Submodules at which a new layer starts; layers in between are merged (a coarser chain
    for a big model). Empty: no merging."""
    name: str = ""
    """A label for the model (default: the factory's name)."""

    @field_validator("module")
    @classmethod
    def _dotted(cls, value):
        if not _DOTTED.match(value):
            raise ValueError(f"expected 'package.module:Factory', got {value!r}")
        return value

    @field_validator("loss")
    @classmethod
    def _known_loss(cls, value):
        if value not in BUILTIN_LOSSES and not _DOTTED.match(value):
            raise ValueError(f"expected one of {', '.join(BUILTIN_LOSSES)} or "
                             f"'package.module:function', got {value!r}")
        return value

    @field_validator("column_factory", "extra_loss")
    @classmethod
    def _dotted_hook(cls, value):
        if value is not None and not _DOTTED.match(value):
            raise ValueError(f"expected 'package.module:function', got {value!r}")
        return value

    @model_validator(mode="after")
    def _unique_inputs(self) -> TorchModelSection:
        if self.columns:
            self._check_columns()
        elif not self.inputs:
            raise ValueError("inputs: give the forward's inputs (or feature columns)")
        elif self.column_factory:
            raise ValueError("column_factory: there are no columns to make")
        names = [i.name for i in self.inputs]
        names += [f"{i.name}{LENGTHS}" for i in self.inputs if i.bag]
        names += [f"{i.name}{WEIGHTS}" for i in self.inputs if i.per_sample_weights]
        if LABEL in names:
            raise ValueError(f"inputs: {LABEL!r} is reserved for the label")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"inputs: duplicate names {dupes}")
        return self


    def _check_columns(self) -> None:
        names = [c.name for c in self.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"columns: duplicate names {dupes}")
        if self.columns_arg in self.kwargs:
            raise ValueError(f"kwargs: {self.columns_arg!r} is the argument that receives the "
                             "columns (columns_arg); remove it from kwargs")
        kinds = [c.kind for c in self.columns]
        if "dense" in kinds and "sparse" in kinds[kinds.index("dense"):]:
            raise ValueError("columns: list the sparse columns first (their ids are the input "
                             "tensor's first columns, id_columns)")
        width = sum(c.width for c in self.columns)
        ids = [c.cardinality for c in self.columns if c.kind == "sparse"]
        if not self.inputs:
            self.inputs = [ModelInput(name=FEATURES, shape=[width], dtype="float32",
                                      id_columns=ids or None)]
            return
        first = self.inputs[0]
        if len(self.inputs) != 1 or first.shape != [width] or first.dtype not in FLOAT_DTYPES \
                or (first.id_columns or []) != ids:
            raise ValueError(f"inputs: with columns, give one float input of shape [{width}] "
                             f"with id_columns {ids} (or leave inputs out: heterps derives it)")


def model_kind(data) -> str:
    """The scenario's `model:` discriminator: "torch" when it names a module, else "zoo"
    (a zoo name, or layers written in YAML)."""
    if isinstance(data, dict):
        return "torch" if "module" in data else "zoo"
    return "torch" if isinstance(data, TorchModelSection) else "zoo"
