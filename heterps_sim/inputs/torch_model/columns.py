"""Feature columns: the objects a model factory receives, built from the scenario's `columns`.

    model:
      module: my_models:build                  # build(columns, hidden=8) -> nn.Module
      kwargs: {hidden: 8}
      columns:
        - {name: user, kind: sparse, cardinality: 1000, embed_dim: 8}
        - {name: item, kind: sparse, cardinality: 500, embed_dim: 8}
        - {name: price, kind: dense}
        - {name: history, kind: dense, width: 4}

    build(columns=[FeatureColumn(name="user", kind="sparse", cardinality=1000, embed_dim=8,
                                 width=1, offset=0, input="features"), ...], hidden=8)

Public CTR libraries build a model from a list of column objects (DeepCTR's SparseFeat and
DenseFeat, TorchRec's EmbeddingBagConfig) rather than from plain numbers; the factory gets
such a list here. `offset` is where the column starts in the input tensor (DeepCTR's
feature_index): forward reads `x[:, c.offset]` for a sparse column, `x[:, c.offset:c.offset +
c.width]` for a dense one. A library's own column classes come from `column_factory`, a
function of one FeatureColumn. No torch here: the simulator reads columns without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from heterps_sim.inputs.torch_model.section import TorchModelSection


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureColumn:
    """One feature column of the model's input tensor."""

    name: str
    kind: Literal["sparse", "dense"]
    """sparse: one id per sample (a float column of whole numbers); dense: `width` floats."""
    cardinality: int = 0
    """Sparse: ids lie in [0, cardinality) (the vocabulary size); 0 for dense columns."""
    embed_dim: int | None = None
    """Sparse: the embedding size asked for (None: the factory chooses)."""
    width: int = 1
    """Numbers per sample in the input tensor (1 for a sparse column)."""
    offset: int = 0
    """The column's first position in the input tensor's last dimension."""
    input: str = ""
    """The forward input that holds the column."""

    @property
    def span(self) -> slice:
        """The column's positions in the input tensor's last dimension."""
        return slice(self.offset, self.offset + self.width)


def feature_columns(section: TorchModelSection) -> list[FeatureColumn]:
    """The section's columns, in order, each at its offset in the (one) input tensor."""
    out, offset = [], 0
    holder = section.inputs[0].name if section.inputs else ""
    for c in section.columns:
        out.append(FeatureColumn(name=c.name, kind=c.kind, cardinality=c.cardinality or 0,
                                 embed_dim=c.embed_dim, width=c.width, offset=offset,
                                 input=holder))
        offset += c.width
    return out
