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
            raise ValueError(f"input {self.name!r}: cardinality is for integer inputs")
        if self.range is not None and not self.range[0] < self.range[1]:
            raise ValueError(f"input {self.name!r}: range must be [low, high] with low < high")
        return self

    @property
    def width(self) -> int:
        """Numbers per sample."""
        out = 1
        for d in self.shape:
            out *= d
        return out


class TorchModelSection(_Strict):
    """A user's PyTorch module, captured with torch.export into the layer chain."""

    module: str
    """"package.module:Factory": a class or function returning an nn.Module, importable from
    the Python path or from the scenario's folder."""
    kwargs: dict = Field(default_factory=dict)
    """Keyword arguments of the factory."""
    inputs: list[ModelInput] = Field(min_length=1)
    """The forward's positional inputs, per sample."""
    loss: str = "bce"
    """bce (sigmoid + binary cross-entropy on logits), softmax_ce (class index label), mse, or
    "pkg.mod:fn" taking (output, label) and returning the batch's mean loss."""
    output: Literal["logits", "probabilities"] | None = None
    """What forward returns for a binary label: logits (bce applies the sigmoid) or
    probabilities (forward ends in a sigmoid, as most public CTR code does: bce then takes
    the log of them directly). Unset: probabilities when the captured graph ends in a
    sigmoid, else logits. The held-out log-loss and AUC read the output the same way."""
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

    @model_validator(mode="after")
    def _unique_inputs(self) -> TorchModelSection:
        names = [i.name for i in self.inputs]
        if LABEL in names:
            raise ValueError(f"inputs: {LABEL!r} is reserved for the label")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"inputs: duplicate names {dupes}")
        return self


def model_kind(data) -> str:
    """The scenario's `model:` discriminator: "torch" when it names a module, else "zoo"
    (a zoo name, or layers written in YAML)."""
    if isinstance(data, dict):
        return "torch" if "module" in data else "zoo"
    return "torch" if isinstance(data, TorchModelSection) else "zoo"
