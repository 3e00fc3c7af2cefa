"""A scenario's `ps:` section: the parameter server its embedding layers use (core/ps_spec.py).

    ps:
      num_shards: 4              # default 4
      shard_gbps: 100            # network of one shard, Gbit/s (default 100)
      hit_rates: {hot: 0.9, warm: 0.09, cold: 0.01}     # or:
      policy: lfu                # replay a Zipf id stream through the PS's own tier code
      hot_fraction: 0.05         #   (heterps_sim.tiers.replay), hot/warm rows as shares of
      warm_fraction: 0.2         #   the table; zipf exponent, rows and ids of the stream
      zipf: 1.05
      tiers: {hot: {bytes_per_s: 5.0e10, latency_s: 2.0e-6}, ...}   # tier speeds (defaults
                                 #   in core/ps_spec.py)
      hosts: [r7i-8xlarge, r7i-16xlarge]   # who holds the tables, priced (cost/ps_hosts.py):
                                 #   plan types among cluster.types; "auto" (default): the
                                 #   memory-optimised AWS types among them (r7i, r6i, ...),
                                 #   a free PS when there are none; "none": a free PS
      optimizer_state_factor: 1.0   # optimizer bytes per table byte held with the rows
                                 #   (Adagrad: one fp32 accumulator per element)
      memory_headroom: 0.8       # share of a host's RAM the rows and their state may fill

Absent, the defaults of core/ps_spec.DEFAULT_PS hold (4 shards at 100 Gbit/s, 90/9/1% hits).
With priced hosts the problem starts with the cheapest choice of cost/ps_hosts.ps_choices (with
exactly `num_shards` shards when the section sets it); a shard's bandwidth is then its host
type's network, so `shard_gbps` is refused beside hosts.
`hit_rates` and `policy` are exclusive. The resolved PsSpec becomes Problem.ps, so the planner
(cost/ps_traffic.py) and the simulator's `ps` effect see the same numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from heterps_sim.core.ps_spec import DEFAULT_HEADROOM, DEFAULT_PS, PsSpec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HitRates(_Strict):
    hot: float = Field(ge=0, le=1, allow_inf_nan=False)
    warm: float = Field(ge=0, le=1, allow_inf_nan=False)
    cold: float = Field(ge=0, le=1, allow_inf_nan=False)


class TierSpeed(_Strict):
    bytes_per_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    latency_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class TierSpeeds(_Strict):
    hot: TierSpeed = Field(default_factory=TierSpeed)
    warm: TierSpeed = Field(default_factory=TierSpeed)
    cold: TierSpeed = Field(default_factory=TierSpeed)


class PsSection(_Strict):
    num_shards: int = Field(default=DEFAULT_PS.num_shards, ge=1, description="PS shards.")
    shard_gbps: float = Field(default=DEFAULT_PS.shard_bytes_per_s * 8 / 1e9, gt=0,
                              allow_inf_nan=False, description="Network of one shard, Gbit/s.")
    hit_rates: HitRates | None = Field(default=None, description="Tier hit rates (sum 1).")
    policy: Literal["lru", "lfu", "paddle"] | None = Field(
        default=None, description="Hot-tier policy whose replayed hit rates to use.")
    hot_fraction: float = Field(default=0.05, ge=0, le=1, description="policy: hot rows / table.")
    warm_fraction: float = Field(default=0.20, ge=0, le=1, description="policy: warm rows / table.")
    zipf: float = Field(default=1.05, gt=0, allow_inf_nan=False, description="policy: Zipf exponent.")
    rows: int = Field(default=100_000, ge=1, description="policy: table rows of the replay.")
    ids: int = Field(default=200_000, ge=1, description="policy: ids replayed.")
    tiers: TierSpeeds = Field(default_factory=TierSpeeds, description="Tier bandwidth/latency.")
    hosts: list[str] | Literal["auto", "none"] = Field(
        default="auto", description="Plan types that may host the PS, priced per shard; 'auto': "
        "the memory-optimised AWS types among cluster.types (none: a free PS); 'none': free.")
    optimizer_state_factor: float = Field(
        default=1.0, ge=0, allow_inf_nan=False, description="Optimizer-state bytes per table "
        "byte kept with the rows (Adagrad, one accumulator per element: 1.0; SGD: 0).")
    memory_headroom: float = Field(default=DEFAULT_HEADROOM, gt=0, le=1, allow_inf_nan=False,
                                   description="Share of a PS host's memory the rows may fill.")

    @model_validator(mode="after")
    def _one_source_of_hit_rates(self):
        if self.hit_rates is not None and self.policy is not None:
            raise ValueError("set hit_rates or policy, not both")
        if self.hit_rates is not None:
            total = self.hit_rates.hot + self.hit_rates.warm + self.hit_rates.cold
            if abs(total - 1.0) > 1e-9:
                raise ValueError(f"hit_rates: hot + warm + cold must sum to 1, got {total:.6g}")
        if self.hot_fraction + self.warm_fraction > 1:
            raise ValueError("hot_fraction + warm_fraction must be at most 1")
        return self


def host_candidates(section: PsSection, type_names) -> tuple[str, ...]:
    """The section's candidate host types (ValueError naming the ps.hosts field)."""
    if section.hosts == "none":
        return ()
    if section.hosts == "auto":
        from heterps_sim.inputs.catalog import memory_optimised_names
        mem = memory_optimised_names()
        return tuple(t for t in type_names if t in mem)
    from heterps_sim.inputs.catalog import load_pool
    known = {t.name for t in load_pool()} | set(type_names)
    for k, name in enumerate(section.hosts):
        if name not in known:
            raise ValueError(f"ps.hosts.{k}: unknown resource type {name!r}")
        if name not in type_names:
            raise ValueError(f"ps.hosts.{k}: {name!r} is not among the scenario's types (a PS "
                             "host is a plan type: add it to cluster.types)")
    return tuple(dict.fromkeys(section.hosts))


def table_bytes(model) -> float:
    """fp32 bytes of every embedding table of a ModelSpec (rows x dim x 4)."""
    from heterps_sim.core.spec import BYTES_PER_FLOAT32
    return float(sum(layer.table_rows * layer.table_dim * BYTES_PER_FLOAT32
                     for layer in model.layers))


def build_ps(section: PsSection, *, model=None, type_names=()) -> PsSpec:
    """The section -> the PsSpec the problem carries (replaying the id stream for `policy`);
    with the model, the tables it holds; with the scenario's types, the candidate hosts."""
    if section.policy is not None:
        from heterps_sim.tiers.replay import replay_hit_rates, zipf_ids
        ids = zipf_ids(section.ids, section.rows, section.zipf, seed=0)
        r = replay_hit_rates(ids, section.policy, int(section.rows * section.hot_fraction),
                             warm_rows=int(section.rows * section.warm_fraction),
                             num_shards=section.num_shards)
        rates = {"hot": r["hot"], "warm": r["warm"], "cold": max(0.0, 1.0 - r["hot"] - r["warm"])}
    elif section.hit_rates is not None:
        rates = section.hit_rates.model_dump()
    else:
        rates = {t: getattr(DEFAULT_PS, t).hit_rate for t in ("hot", "warm", "cold")}
    tiers = {}
    for t in ("hot", "warm", "cold"):
        base, speed = getattr(DEFAULT_PS, t), getattr(section.tiers, t)
        tiers[t] = base.model_copy(update={
            "hit_rate": rates[t],
            **({"bytes_per_s": speed.bytes_per_s} if speed.bytes_per_s is not None else {}),
            **({"latency_s": speed.latency_s} if speed.latency_s is not None else {})})
    hosts = host_candidates(section, tuple(type_names))
    if hosts and "shard_gbps" in section.model_fields_set:
        raise ValueError("ps.shard_gbps: a priced PS's shard bandwidth is its host type's "
                         "network; drop shard_gbps or set ps.hosts: none")
    return PsSpec(num_shards=section.num_shards, shard_bytes_per_s=section.shard_gbps * 1e9 / 8,
                  hosts=hosts, table_bytes=0.0 if model is None else table_bytes(model),
                  optimizer_state_factor=section.optimizer_state_factor,
                  memory_headroom=section.memory_headroom, **tiers)


def priced_ps(problem, section: PsSection):
    """The problem with its PS on the cheapest host choice (cost/ps_hosts.py; exactly
    `num_shards` shards when the section sets them), or as it is when the PS is free."""
    from heterps_sim.cost import ps_hosts
    if problem.ps is None or not problem.ps.hosts:
        return problem
    fixed = section.num_shards if "num_shards" in section.model_fields_set else None
    choice = ps_hosts.cheapest_choice(problem, fixed)
    if choice is None:
        held = problem.ps.held_bytes / 1e9
        raise ValueError(
            f"ps.hosts: no host among {', '.join(problem.ps.hosts)} holds the {held:,.1f} GB of "
            "tables and optimizer state" + (f" with {fixed} shards" if fixed else
                                             f" within {ps_hosts.MAX_SHARDS} shards"))
    return ps_hosts.with_ps(problem, choice)


def with_ps(problem, spec: PsSpec):
    """The problem with `spec` as its PS; under the default model the PS side of every
    embedding layer's traffic (core/ps_odt.py: one pull and one push per batch) is added to
    its odt_s. The paper model's odt is HeterPS's: the unit's own side only, already in odt_s
    (roofline)."""
    import dataclasses

    from heterps_sim.core import ps_odt
    if problem.sparse_bytes is None or not ps_odt.holds_ps_side(problem.cost_model):
        return dataclasses.replace(problem, ps=spec)
    side = ps_odt.ps_side_s(problem.sparse_bytes, problem.batch_size, spec, problem.latency_s)
    return dataclasses.replace(problem, ps=spec, odt_s=ps_odt.with_ps_side(problem.odt_s, side))
