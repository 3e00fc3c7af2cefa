"""The parameter server a plan's embedding layers talk to: shards, their bandwidth, tier hit rates.

One `PsSpec` per problem (`Problem.ps`; None means `DEFAULT_PS`). A scenario sets it in its
`ps:` section (inputs/ps_section.py), a problem JSON under "ps". The planner
(cost/ps_traffic.py: the embedding-transfer term and the PS's shared capacity) and the
simulator (its `ps` effect) read the same numbers from it.

    num_shards         shards serving every request in equal parts (ids hash uniformly)
    shard_bytes_per_s  network bandwidth of one shard
    hot / warm / cold  tiers: share of rows found there (sum 1), read/write bandwidth, latency

Defaults (DEFAULT_PS): 4 shards on 100 Gbit/s (12.5 GB/s) each; hot 90% (device/RAM cache,
50 GB/s, 2 us), warm 9% (RAM, 10 GB/s, 20 us), cold 1% (NVMe, 1 GB/s, 200 us).
numpy-free, pydantic only (core never imports simpy or torch).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TierSpec(_Strict):
    """One storage tier of a parameter-server shard."""

    hit_rate: float = Field(ge=0, le=1, allow_inf_nan=False,
                            description="Share of the rows a request finds in this tier.")
    bytes_per_s: float = Field(gt=0, allow_inf_nan=False,
                               description="Read/write bandwidth of the tier.")
    latency_s: float = Field(ge=0, allow_inf_nan=False, description="Access latency of the tier.")


DEFAULT_HOT = TierSpec(hit_rate=0.90, bytes_per_s=50e9, latency_s=2e-6)
DEFAULT_WARM = TierSpec(hit_rate=0.09, bytes_per_s=10e9, latency_s=2e-5)
DEFAULT_COLD = TierSpec(hit_rate=0.01, bytes_per_s=1e9, latency_s=2e-4)


class PsSpec(_Strict):
    """The parameter server's shards and tiers (see the module docstring)."""

    num_shards: int = Field(default=4, ge=1, description="PS shards serving every request in "
                            "equal parts.")
    shard_bytes_per_s: float = Field(default=12.5e9, gt=0, allow_inf_nan=False,
                                     description="Network bandwidth of one shard (100 Gbit/s).")
    hot: TierSpec = Field(default=DEFAULT_HOT, description="Device/RAM cache of hot rows.")
    warm: TierSpec = Field(default=DEFAULT_WARM, description="RAM tier.")
    cold: TierSpec = Field(default=DEFAULT_COLD, description="Disk tier (NVMe-like).")

    @model_validator(mode="after")
    def _hit_rates_sum_to_one(self):
        total = self.hot.hit_rate + self.warm.hit_rate + self.cold.hit_rate
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"hot + warm + cold hit rates must sum to 1, got {total:.6g}")
        return self

    @property
    def tiers(self) -> tuple[TierSpec, TierSpec, TierSpec]:
        return (self.hot, self.warm, self.cold)

    @property
    def seconds_per_byte(self) -> float:
        """Service seconds per byte of ONE shard: its network plus the expected tier mix."""
        return 1.0 / self.shard_bytes_per_s + sum(t.hit_rate / t.bytes_per_s for t in self.tiers)

    @property
    def tier_latency_s(self) -> float:
        """Expected tier latency of one request."""
        return sum(t.hit_rate * t.latency_s for t in self.tiers)


DEFAULT_PS = PsSpec()
"""The parameter server of a problem that names none."""
