"""The parameter server a plan's embedding layers talk to: shards, their bandwidth, tier hit rates.

One `PsSpec` per problem (`Problem.ps`; None means `DEFAULT_PS`). A scenario sets it in its
`ps:` section (inputs/ps_section.py), a problem JSON under "ps". The planner
(cost/ps_traffic.py: the embedding-transfer term and the PS's shared capacity) and the
simulator (its `ps` effect) read the same numbers from it.

    num_shards         shards serving every request in equal parts (ids hash uniformly)
    shard_bytes_per_s  network bandwidth of one shard
    hot / warm / cold  tiers: share of rows found there (sum 1), read/write bandwidth, latency

Who holds the tables, and what that costs (cost/ps_hosts.py enumerates the choices):

    host_type          the plan type whose units host the shards, one unit per shard;
                       "" = a free PS (nobody is billed for it: the paper's setting)
    price_per_hour     USD per hour of all the hosts (num_shards x the type's price); every
                       plan of the problem pays it (cost/reference.fixed_price_per_hour)
    hosts              the candidate host types the planner may choose among
    table_bytes        embedding rows held, fp32 (sum of rows x dim x 4 over the tables)
    optimizer_state_factor  optimizer bytes per table byte kept with the rows (Adagrad: one
                       fp32 accumulator per row element = 1.0; row-wise Adagrad = 1/dim; SGD 0)
    memory_headroom    share of a host's memory the rows and their state may use

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


DEFAULT_HEADROOM = 0.8
"""Share of a PS host's RAM the rows and their optimizer state may fill: the rest holds the
operating system, the server's id index (a hash map of 8-byte ids), request buffers and the
page cache of the cold tier."""

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
    host_type: str = Field(default="", description="Plan type whose units host the shards, one "
                           "unit per shard; empty: a free PS.")
    price_per_hour: float = Field(default=0.0, ge=0, allow_inf_nan=False,
                                  description="USD per hour of all the PS hosts.")
    hosts: tuple[str, ...] = Field(default=(), description="Candidate host types (plan types) "
                                   "the planner may choose among; empty: the PS is free.")
    table_bytes: float = Field(default=0.0, ge=0, allow_inf_nan=False,
                               description="Embedding table bytes the PS holds (fp32 rows).")
    optimizer_state_factor: float = Field(
        default=1.0, ge=0, allow_inf_nan=False, description="Optimizer-state bytes per table "
        "byte (Adagrad: one accumulator per element = 1.0).")
    memory_headroom: float = Field(default=DEFAULT_HEADROOM, gt=0, le=1, allow_inf_nan=False,
                                   description="Share of a host's memory the rows may use.")

    @model_validator(mode="after")
    def _hit_rates_sum_to_one(self):
        total = self.hot.hit_rate + self.warm.hit_rate + self.cold.hit_rate
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"hot + warm + cold hit rates must sum to 1, got {total:.6g}")
        return self

    @model_validator(mode="after")
    def _priced_only_with_a_host(self):
        if self.price_per_hour > 0 and not self.host_type:
            raise ValueError("price_per_hour: a priced PS needs host_type (the type its hosts are)")
        return self

    @property
    def held_bytes(self) -> float:
        """Bytes the hosts must hold: the tables and the optimizer state kept with the rows."""
        return self.table_bytes * (1.0 + self.optimizer_state_factor)

    @property
    def aggregate_bytes_per_s(self) -> float:
        """Bytes per second all shards serve together (capacity; request_s is B x sparse /
        this): the only way num_shards and shard_bytes_per_s enter the cost model."""
        return self.num_shards / self.seconds_per_byte

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
