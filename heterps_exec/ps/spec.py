"""Nouns of the parameter server: a table, a shard's configuration, a bad request.

No torch, no numpy: clients send a `TableSpec` to every shard as JSON, and the engine builds
both from its plan.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from heterps_sim.tiers import POLICIES  # the hot-tier policies, decided in heterps_sim.ps

OPTIMIZERS = ("sgd", "adagrad")
QUANTIZE = ("none", "fp16", "bf16", "int8")
"""Wire encodings of pulled rows and pushed gradients: `heterps_exec.hps.quantize.MODES`
(repeated here so that the CLI imports no torch; a test keeps the two equal)."""


class PSRequestError(ValueError):
    """A request the server refuses (bad id, dtype, shape, table); str() says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSpec:
    """One sparse table served by the PS; every shard holds the rows with id % shards == it."""

    name: str
    """The engine's parameter name, e.g. "emb_0.tables.0"; also seeds the initial rows."""
    rows: int | None
    """Number of rows (ids in [0, rows)), or None for an unbounded table (any id >= 0)."""
    dim: int
    """Row width (floats)."""
    optimizer: str = "sgd"
    """"sgd" or "adagrad" (torch.optim.Adagrad with lr_decay = weight_decay = 0)."""
    lr: float = 0.01
    """Learning rate."""
    initial_accumulator: float = 0.0
    """Adagrad's initial_accumulator_value; its state is kept next to the row."""
    eps: float = 1e-10
    """Adagrad's eps."""

    def __post_init__(self):
        if not self.name:
            raise ValueError("table name must not be empty")
        if self.rows is not None and self.rows < 1:
            raise ValueError(f"table {self.name!r}: rows must be >= 1 or None, got {self.rows}")
        if self.dim < 1:
            raise ValueError(f"table {self.name!r}: dim must be >= 1, got {self.dim}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"table {self.name!r}: optimizer must be one of "
                             f"{', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if not (math.isfinite(self.lr) and self.lr >= 0):
            raise ValueError(f"table {self.name!r}: lr must be finite and >= 0, got {self.lr}")

    @property
    def width(self) -> int:
        """Floats stored per row: the row, then Adagrad's accumulator when there is one."""
        return self.dim * (2 if self.optimizer == "adagrad" else 1)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TableSpec:
        return cls(**d)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardConfig:
    """How one PS shard keeps its rows."""

    shard: int = 0
    """This shard's index; it owns ids with id % num_shards == shard."""
    num_shards: int = 1
    """PS ranks in all."""
    policy: str = "lfu"
    """Hot-tier policy: lru, lfu (with admission) or paddle (demote after unseen passes)."""
    hot_fraction: float = 0.05
    """Hot-tier rows per table, as a share of a fixed table's rows (split over shards)."""
    warm_fraction: float = 0.20
    """Warm (RAM) tier rows per table, as a share of a fixed table's rows."""
    unbounded_hot_rows: int = 65536
    """Hot-tier rows per shard for unbounded tables (no size to take a share of)."""
    unbounded_warm_rows: int = 262144
    """Warm-tier rows per shard for unbounded tables."""
    passes: int = 16
    """paddle policy: a row unseen for more than this many steps is demoted."""
    seed: int = 0
    """Seed of the initial rows (`heterps_exec.rows.initial_rows`)."""
    staleness: int = 0
    """0: synchronous steps; s > 0: pushes apply on arrival, pulls may lag s steps."""
    work_dir: str = ""
    """Directory of the live disk tier (rebuilt from the checkpoint on restart); "" = a
    temporary directory removed at close."""

    def __post_init__(self):
        if not 0 <= self.shard < self.num_shards:
            raise ValueError(f"shard must be in [0, {self.num_shards}), got {self.shard}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        for name in ("hot_fraction", "warm_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.staleness < 0:
            raise ValueError(f"staleness must be >= 0, got {self.staleness}")

    def capacities(self, spec: TableSpec) -> tuple[int, int]:
        """(hot rows, warm rows) of `spec` on this shard."""
        if spec.rows is None:
            return self.unbounded_hot_rows, self.unbounded_warm_rows
        per_shard = -(-spec.rows // self.num_shards)
        return (math.ceil(per_shard * self.hot_fraction),
                math.ceil(per_shard * self.warm_fraction))
