"""A scenario's `data:` section: where `heterps-exec run` takes its training batches from.

    data:                                  # absent: synthetic, 10% extra rows held out
      format: criteo                       # synthetic | criteo | parquet | factory
      path: data/day_0.tsv                 # relative to the scenario file
      holdout: {fraction: 0.1}             # the file's last 10% of rows, scored at the end
      max_bad_fraction: 0.01               # more malformed rows than this: bad input

One model per format (pydantic, `extra="forbid"`, told apart by `format`), so a field that
belongs to another format is an error naming it. The simulator ignores this section; the
engine's data package (heterps_exec.data) reads it. No numpy, no torch.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Holdout(_Strict):
    """The held-out rows, scored with log-loss and AUC at the end of a run (never trained on)."""

    fraction: float = Field(default=0.1, ge=0, lt=1, allow_inf_nan=False)
    """Share of the rows held out: the last rows of a file, or that many extra synthetic
    rows (0: no held-out slice, no scoring)."""
    rows: int | None = Field(default=None, ge=0)
    """Exactly this many rows instead of `fraction`."""
    path: str = ""
    """A separate file in the same format (criteo, parquet; e.g. the last day): the whole
    main file is then for training."""

    def enabled(self) -> bool:
        return bool(self.path) or (self.rows if self.rows is not None else self.fraction) > 0


class _Common(_Strict):
    holdout: Holdout = Field(default_factory=Holdout)
    max_bad_fraction: float = Field(default=0.01, ge=0, le=1, allow_inf_nan=False)
    """Malformed rows among those a run reads, as a share: more is bad input (exit 2 before
    any rank starts); up to it they are skipped, counted and reported."""


class SyntheticData(_Common):
    format: Literal["synthetic"] = "synthetic"
    num_samples: int = Field(default=0, ge=0)
    """Training rows (0: `--num-samples`, else 20 global batches' worth, at least 4096)."""
    zipf_a: float = Field(default=1.05, gt=1, allow_inf_nan=False)
    """Exponent of the ids' Zipf distribution."""


class _Streamed(_Common):
    columns: dict[str, str | list[str]] = Field(default_factory=dict)
    """Model raw tensor -> column name(s), in the tensor's order; absent tensors take the
    format's default (criteo: I1..I13 to the features, C1..C26 to the ids, in order)."""
    hash_seed: int = 0
    """Salt of the hash that maps categorical values to table rows."""
    shuffle_rows: int = Field(default=0, ge=0)
    """Rows are permuted within consecutive windows of this many rows, per epoch and seed
    (0: file order)."""
    dense_transform: Literal["log1p", "none"] = "log1p"
    """Dense values: log(1 + max(x, 0)) (Criteo's usual preprocessing) or as they are."""


class CriteoData(_Streamed):
    format: Literal["criteo"]
    path: str
    """The text file: label, I1..I13, C1..C26 (8-digit hex), tab-separated, no header."""
    block_bytes: int = Field(default=4 << 20, ge=1 << 10, le=1 << 30)
    """Text read per block (bounds the reader's memory with the shuffle window)."""


class ParquetData(_Streamed):
    format: Literal["parquet"]
    path: str
    """The Parquet file."""
    label: str = "label"
    """The label column (0/1)."""
    dense_transform: Literal["log1p", "none"] = "none"
    batch_rows: int = Field(default=65536, ge=1)
    """Rows read per Parquet batch."""


class FactoryData(_Strict):
    format: Literal["factory"]
    factory: str
    """`pkg.mod:fn`: fn(split="train" | "holdout", **kwargs) returns an iterable of
    {raw tensor name: array [n] or [n, width]} chunks, the same every call."""
    kwargs: dict = Field(default_factory=dict)
    holdout: bool = True
    """Score fn(split="holdout") at the end of the run."""
    max_bad_fraction: float = Field(default=0.01, ge=0, le=1, allow_inf_nan=False)
    shuffle_rows: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _dotted(self) -> FactoryData:
        module, _, name = self.factory.partition(":")
        if not module or not name:
            raise ValueError(f"factory: expected 'pkg.mod:fn', got {self.factory!r}")
        return self


DataSection = Annotated[SyntheticData | CriteoData | ParquetData | FactoryData,
                        Field(discriminator="format")]
"""The `data:` section, one model per `format`."""
