"""Nouns of the parameter server: a table, a shard's configuration, a bad request.

No torch, no numpy: clients send a `TableSpec` to every shard as JSON, and the engine builds
both from its plan. A spec is checked in type and size (MAX_ROWS, MAX_DIM), and a shard refuses
a declaration past its RAM or disk budget (`ShardConfig.footprint`) before allocating anything.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from heterps_sim.tiers import POLICIES  # the hot-tier policies, decided in heterps_sim.ps

OPTIMIZERS = ("sgd", "adagrad")
QUANTIZE = ("none", "fp16", "bf16", "int8")
"""Wire encodings of pulled rows and pushed gradients: `heterps_exec.hps.quantize.MODES`
(repeated here so that the CLI imports no torch; a test keeps the two equal)."""


MAX_ROWS = 1 << 40
"""Rows of one table (ids < 2^40); more is a client's mistake, not a workload."""
MAX_DIM = 1 << 16
"""Floats per row."""
MAX_NAME = 256
"""Characters of a table's name."""
MAX_TABLES = 1024
"""Tables per shard (each holds files and RAM)."""


def _ram_default() -> int:
    """A shard's RAM budget for its tables: half this machine's memory, at most 64 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 << 30
    return min(total // 2, 64 << 30)


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
        # a spec also arrives as JSON from any client: check types, not only values
        if not isinstance(self.name, str) or not 0 < len(self.name) <= MAX_NAME:
            raise ValueError(f"table name must be a string of 1..{MAX_NAME} characters")
        if self.rows is not None and (not _is_int(self.rows) or not 1 <= self.rows <= MAX_ROWS):
            raise ValueError(f"table {self.name!r}: rows must be an integer in 1..{MAX_ROWS} "
                             f"or None, got {self.rows!r}")
        if not _is_int(self.dim) or not 1 <= self.dim <= MAX_DIM:
            raise ValueError(f"table {self.name!r}: dim must be an integer in 1..{MAX_DIM}, "
                             f"got {self.dim!r}")
        for field in ("lr", "initial_accumulator", "eps"):
            x = getattr(self, field)
            if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
                raise ValueError(f"table {self.name!r}: {field} must be a finite number, "
                                 f"got {x!r}")
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
        if not isinstance(d, dict):
            raise ValueError(f"a table spec is a JSON object, got {type(d).__name__}")
        return cls(**d)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


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
    """Seed of the initial rows (`heterps_exec.model.rows.initial_rows`)."""
    staleness: int = 0
    """0: synchronous steps; s > 0: pushes apply on arrival, pulls may lag s steps."""
    work_dir: str = ""
    """Directory of the live disk tier (rebuilt from the checkpoint on restart); "" = a
    temporary directory removed at close."""
    max_ram_bytes: int = dataclasses.field(default_factory=_ram_default)
    """RAM the shard's tables may take in all (hot and warm tiers, per-key bookkeeping); a
    declaration past it is refused. Default: half the machine's memory, at most 64 GiB."""
    max_disk_bytes: int = 1 << 40
    """Disk tier bytes (sparse files) the shard's tables may take in all."""

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

    def footprint(self, spec: TableSpec) -> tuple[int, int]:
        """(RAM bytes, disk bytes) table `spec` takes on this shard when declared: hot and warm
        rows, per-key bookkeeping of the policies (3 int64 per key), the disk tier's file."""
        hot, warm = self.capacities(spec)
        keys = -(-spec.rows // self.num_shards) if spec.rows is not None else hot + warm
        ram = (hot + warm) * spec.width * 4 + 3 * 8 * keys
        disk = keys * spec.width * 4 if spec.rows is not None else 0
        return ram, disk

    def capacities(self, spec: TableSpec) -> tuple[int, int]:
        """(hot rows, warm rows) of `spec` on this shard."""
        if spec.rows is None:
            return self.unbounded_hot_rows, self.unbounded_warm_rows
        per_shard = -(-spec.rows // self.num_shards)
        return (math.ceil(per_shard * self.hot_fraction),
                math.ceil(per_shard * self.warm_fraction))
