"""What the simulator models and with which numbers: `DesOptions` (validated, extra="forbid").

Every effect is off by default; with all of them off the simulator reproduces the analytic
model (see des/__init__.py). `effects` names the mechanisms switched on:

    bubbles     gpipe / 1f1b flush the pipeline at every step end (fill and drain); off: every
                schedule runs as one continuous 1F1B stream (`async`: no flush ever)
    allreduce   the replicas of a stage ring-all-reduce their dense gradients once per step
                (flush schedules wait for it; continuous ones overlap it with the next step)
    transfers   boundary activations / gradients travel as explicit messages over links
                (bandwidth + latency per message) instead of being folded into the sender's work
    contention  messages, all-reduces and PS requests queue on per-unit network interfaces
                (implies transfers: folded transfers have nothing to queue)
    ps          embedding rows are pulled from / pushed to parameter-server shards with tiers
    jitter      every operation's duration x a log-normal factor (mean 1, CV `jitter_cv`)
    stragglers  a fraction of the units run slower by a factor
    preemption  units are preempted (Poisson), down for a restart delay, and redo lost work
    cores       (not in "all") every replica runs on ONE host with `host_cores` cores (the engine on a single
                machine): the CPU part of each computation waits for a free core (FIFO); the
                rest of it (an emulated slower type sleeps, `cpu_share`) does not hold one
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from heterps_sim.core.hps import HpsOptions

EFFECTS = ("bubbles", "allreduce", "transfers", "contention", "ps", "jitter", "stragglers",
           "preemption")
"""The cluster effects ("all"), in the order the effects table lists them."""
HOST_EFFECTS = ("cores",)
"""Effects of running every replica on one machine (validating the engine); never in "all"."""
VARIABILITY = frozenset({"jitter", "stragglers", "preemption"})
"""Effects drawn from the seed: with none of them on, every seed gives the same result."""


def parse_effects(text: str | frozenset | set | list | tuple | None) -> frozenset[str]:
    """"none" | "all" | "a,b,c" (or an iterable of names) -> frozenset; unknown names raise."""
    if text is None:
        return frozenset()
    if isinstance(text, str):
        text = text.strip()
        if text in ("", "none"):
            return frozenset()
        if text == "all":
            return frozenset(EFFECTS)
        names = [t.strip() for t in text.split(",") if t.strip()]
    else:
        names = list(text)
    unknown = sorted(set(names) - set(EFFECTS) - set(HOST_EFFECTS))
    if unknown:
        raise ValueError(f"unknown effect(s) {', '.join(unknown)} "
                         f"(known: none, all, {', '.join(EFFECTS + HOST_EFFECTS)})")
    return frozenset(names)


class _either:
    """A method callable on the class (builds new options) or on an instance (copies them)."""

    def __init__(self, fn):
        self.fn, self.__doc__ = fn, fn.__doc__

    def __get__(self, obj, cls):
        return lambda *args, **kwargs: self.fn(cls, obj, *args, **kwargs)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(_either,))


class TierOptions(_Strict):
    """One storage tier of a parameter-server shard."""

    hit_rate: float = Field(ge=0, le=1,
                            description="Share of the rows a request finds in this tier.")
    bytes_per_s: float = Field(gt=0, allow_inf_nan=False,
                               description="Read/write bandwidth of the tier.")
    latency_s: float = Field(ge=0, allow_inf_nan=False, description="Access latency of the tier.")


class PsOptions(_Strict):
    """The parameter-server model of the `ps` effect.

    Embedding layers are those with `problem.sparse_bytes[i] > 0`; their analytic odt is taken
    out of the stage's work and replaced by a pull of B/m x sparse_bytes before each forward and
    a push of as many gradient bytes after each backward. A request is split evenly over the
    shards (ids hash uniformly); a shard serves one request at a time, FIFO, for its part p =
    bytes / num_shards: p / shard_bytes_per_s + sum_t hit_t x p / tier_t.bytes_per_s; then the
    reply takes sum_t hit_t x tier_t.latency_s + the problem's latency and crosses the unit's
    network (bytes / network_bytes_per_s of its type). Tier hit rates are expected shares (no
    per-request draw); jitter varies the service time.
    """

    num_shards: int = Field(default=4, ge=1, description="PS shards serving every request in "
                            "equal parts (simulated as one Resource: they stay in lockstep).")
    shard_bytes_per_s: float = Field(default=12.5e9, gt=0, allow_inf_nan=False,
                                     description="Network bandwidth of one shard (100 Gbit/s).")
    hot: TierOptions = Field(default=TierOptions(hit_rate=0.90, bytes_per_s=50e9, latency_s=2e-6),
                             description="Device/RAM cache of hot rows.")
    warm: TierOptions = Field(default=TierOptions(hit_rate=0.09, bytes_per_s=10e9, latency_s=2e-5),
                              description="RAM tier.")
    cold: TierOptions = Field(default=TierOptions(hit_rate=0.01, bytes_per_s=1e9, latency_s=2e-4),
                              description="Disk tier (NVMe-like).")
    prefetch: bool = Field(default=True, description="Pull the next forward's rows while the "
                           "current operation computes (depth 1); False: pull just before it.")

    @model_validator(mode="after")
    def _hit_rates_sum_to_one(self) -> PsOptions:
        total = self.hot.hit_rate + self.warm.hit_rate + self.cold.hit_rate
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"ps: hot + warm + cold hit rates must sum to 1, got {total:.6g}")
        return self

    @property
    def seconds_per_byte(self) -> float:
        """Shard service seconds per byte: its network plus the tier mix."""
        tiers = (self.hot, self.warm, self.cold)
        return 1.0 / self.shard_bytes_per_s + sum(t.hit_rate / t.bytes_per_s for t in tiers)

    @property
    def tier_latency_s(self) -> float:
        return sum(t.hit_rate * t.latency_s for t in (self.hot, self.warm, self.cold))


class DesOptions(HpsOptions):
    """Knobs of one simulation; `DesOptions.with_effects("all")` switches every effect on.

    The H-PS fields (share, slow_replicas, overlap, quantize) come from
    heterps_sim.core.hps.HpsOptions, as the engine's run request has them: quantize acts on
    explicit transfers (effect transfers), overlap on the all-reduce (effect allreduce).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(_either,))

    schedule: Literal["gpipe", "1f1b", "async"] | None = Field(
        default=None, description="Microbatch schedule; None = the plan's.")
    num_microbatches: int | None = Field(
        default=None, ge=1, description="Microbatches per step; None = the plan's when > 1, "
        "else lanes.default_microbatches (a multiple of every stage's replica count).")
    num_steps: int = Field(default=8, ge=1, description="Training steps simulated.")
    warmup_steps: int | None = Field(
        default=None, ge=0, description="Steps left out of the throughput measurement (pipeline "
        "fill); None = max(1, num_steps // 4) when num_steps >= 2, else 0.")
    effects: frozenset[str] = Field(default=frozenset(),
                                    description=f"Effects on, among {EFFECTS}.")
    backward_fraction: float = Field(
        default=2 / 3, gt=0, lt=1, description="Share of a microbatch's stage work spent in the "
        "backward pass (forward : backward = 1 : 2).")
    forward_boundary_share: float = Field(
        default=0.5, ge=0, le=1, description="transfers: share of boundary_bytes that are forward "
        "activations (the rest are backward gradients).")
    jitter_cv: float = Field(default=0.1, ge=0, allow_inf_nan=False,
                             description="jitter: coefficient of variation of each duration.")
    straggler_fraction: float = Field(
        default=0.1, ge=0, le=1, description="stragglers: share of the units (rounded) that are slow.")
    straggler_slowdown: float = Field(default=1.5, ge=1, allow_inf_nan=False,
                                      description="stragglers: duration factor of a slow unit.")
    preemption_rate_per_hour: float = Field(
        default=1.0, ge=0, allow_inf_nan=False, description="preemption: Poisson rate per unit.")
    restart_delay_s: float = Field(
        default=60.0, ge=0, allow_inf_nan=False,
        description="preemption: seconds until a replacement unit has taken over.")
    allreduce_algorithm: Literal["ring", "tree"] = Field(
        default="ring", description="allreduce: ring (2(k-1)/k x bytes / bandwidth + 2(k-1) x "
        "latency) or tree (2 x bytes / bandwidth + 2 ceil(log2 k) x latency: reduce then "
        "broadcast, pipelined).")
    allreduce_measured: tuple[tuple[int, float, float], ...] | None = Field(
        default=None, description="allreduce: measured times on the host as (ranks, bytes, "
        "seconds) rows (heterps-exec profile's links JSON, 'allreduce'); a stage whose replica "
        "count was measured takes its time from them (linear in bytes between and beyond the "
        "measured sizes) instead of the formula: with more ranks than cores the ring's hops wait "
        "for descheduled members, which no bandwidth/latency formula has.")
    param_bytes: tuple[float, ...] | None = Field(
        default=None, description="allreduce: dense parameter bytes per layer; None = "
        "problem.param_bytes (0 when the problem has none).")
    ps: PsOptions = Field(default_factory=PsOptions, description="ps: shards and tiers.")
    host_cores: int = Field(default=2, ge=1, description="cores: CPU cores of the one host "
                            "every replica shares.")
    core_sharing: Literal["fifo", "fair"] = Field(
        default="fifo", description="cores: a computation waits for a free core and then "
        "holds it (fifo), or all running computations share the cores, each at "
        "min(1, cores / running) speed, as an OS time-slices them (fair; des/fair_cores.py).")
    cpu_share: tuple[float, ...] | None = Field(
        default=None, description="cores: per stage, the share of its compute that holds a "
        "core (1 / slowdown for a type emulated by dilation); None = 1 for every stage.")
    batch: bool = Field(
        default=True, description="Let a replica run ahead through operations whose inputs are "
        "already known, without a SimPy timeout each (exactly the same timeline); only used when "
        "no shared resource is modelled (contention and ps off).")

    @field_validator("effects", mode="before")
    @classmethod
    def _known_effects(cls, v):
        return parse_effects(v)

    @field_validator("cpu_share")
    @classmethod
    def _share(cls, v):
        if v is not None and any(not 0 < x <= 1 for x in v):
            raise ValueError("every cpu_share must lie in (0, 1]")
        return v

    @field_validator("param_bytes")
    @classmethod
    def _non_negative(cls, v):
        if v is not None and any(not math.isfinite(x) or x < 0 for x in v):
            raise ValueError("every entry must be a finite number >= 0")
        return v

    @model_validator(mode="after")
    def _warmup_below_steps(self) -> DesOptions:
        if self.warmup_steps is not None and self.warmup_steps >= self.num_steps:
            raise ValueError(f"warmup_steps ({self.warmup_steps}) must be below num_steps "
                             f"({self.num_steps}): no step would be measured")
        return self

    @property
    def measured_from(self) -> int:
        """First measured step (the number of warm-up steps)."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        return max(1, self.num_steps // 4) if self.num_steps >= 2 else 0

    @_either
    def with_effects(cls, self, spec, **fields) -> DesOptions:
        """Options with `effects` = spec ("all", "none", "a,b" or names): on the class, new
        options (other fields from **fields); on an instance, a copy with effects replaced."""
        if self is None:
            return cls(effects=parse_effects(spec), **fields)
        return cls(**{**self.model_dump(), **fields, "effects": parse_effects(spec)})

    @property
    def active_effects(self) -> frozenset[str]:
        """`effects` plus what they imply (contention needs explicit transfers)."""
        return self.effects | ({"transfers"} if "contention" in self.effects else set())

    def on(self, effect: str) -> bool:
        return effect in self.active_effects
