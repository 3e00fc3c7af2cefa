"""What the simulator models and with which numbers: `DesOptions` (validated, extra="forbid").

Every effect is off by default; with all of them off the simulator reproduces the analytic
model (see des/__init__.py). `effects` names the mechanisms switched on:

    bubbles     gpipe / 1f1b flush the pipeline at every step end (fill and drain); off: every
                schedule runs as one continuous 1F1B stream (`async`: no flush ever)
    allreduce   the replicas of a stage ring-all-reduce their dense gradients once per step
                (flush schedules wait for it; continuous ones overlap it with the next step)
    transfers   boundary activations / gradients travel as explicit messages over links: the
                receiver sees one bytes / bandwidth + latency after it was sent (the sender's
                work keeps the analytic boundary term: a unit does not compute while it sends)
    contention  messages, all-reduces and PS requests queue on per-unit network interfaces
                (implies transfers: folded transfers have nothing to queue)
    ps          embedding rows are pulled from / pushed to the parameter server's shards as
                requests that queue (PsOptions): adds the queueing the analytic model cannot see
    jitter      every operation's duration x (1 + jitter_cv E), E ~ Exp(1) (des/effects.py)
    stragglers  a fraction of the units run slower by a factor
    preemption  units are preempted (Poisson), down for a restart delay, and redo lost work
    cores       (not in "all") every replica runs on ONE host with `host_cores` cores (the engine on a single
                machine): the CPU part of each computation waits for a free core (FIFO); the
                rest of it (an emulated slower type sleeps, `cpu_share`) does not hold one.
                With `message_cpu` and transfers, a boundary message's CPU (gloo's send and
                receive) is charged on the host's cores too (des/work.py)
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from heterps_sim.core.hps import HpsOptions
from heterps_sim.core.limits import MAX_MICROBATCHES, MAX_SIM_STEPS
from heterps_sim.core.ps_spec import PsSpec, TierSpec

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
    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(_either,),
                              allow_inf_nan=False)


TierOptions = TierSpec
"""One storage tier of a parameter-server shard (core/ps_spec.py)."""


class PsOptions(PsSpec):
    """The parameter server of the `ps` effect: the problem's (core/ps_spec.py, a scenario's
    `ps:` section) or one set here to ask "what if" (DesOptions.ps).

    The analytic model already counts the PS's unloaded time in the embedding layers' odt
    (cost/ps_traffic.py: one pull and one push per batch); the effect issues the same traffic
    per microbatch as requests to the shards, which serve one request at a time, FIFO (equal
    parts keep them in lockstep: one SimPy Resource), each for its part n / num_shards x
    seconds_per_byte (x jitter). A replica's forward waits until its pull is being served:
    what the effect adds is the time spent queueing behind other replicas' requests.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    prefetch: bool = Field(default=True, description="Queue the next forward's pull of the "
                           "same step once this forward has computed (depth 1, as the engine); "
                           "False: as that forward starts.")


class MessageCpu(_Strict):
    """cores: what one boundary message costs the host's CPU, measured (heterps-exec profile's
    links JSON, "message_cpu"; benchmarks/bench_message_cpu.py): seconds = per message + per
    byte x bytes, on the sender and on the receiver."""

    send_s: float = Field(ge=0, description="Sender's CPU seconds per message.")
    send_s_per_byte: float = Field(default=0.0, ge=0, description="Sender's CPU seconds per byte.")
    recv_s: float = Field(ge=0, description="Receiver's CPU seconds per message.")
    recv_s_per_byte: float = Field(default=0.0, ge=0,
                                   description="Receiver's CPU seconds per byte.")
    per_cut_s: dict[str, tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(ge=0)]]] \
        = Field(default_factory=dict,
                description="Per message at the cut after the named layer, measured there "
                            "(heterps-exec validate --message-cpu calibrate): (the upstream "
                            "rank's, for its forward sends and gradient receives; the "
                            "downstream rank's, for its forward receives and gradient sends), "
                            "replacing send_s and recv_s at that cut; the per-byte terms stay.")

    def _each(self, cut: str | None, upstream: bool, default: float) -> float:
        pair = self.per_cut_s.get(cut)  # (None: no cut named, the default)
        return default if pair is None else pair[0 if upstream else 1]

    def send(self, nbytes: float, cut: str | None = None, upstream: bool = True) -> float:
        """A message sent across `cut` (None: no cut's figure) by its upstream rank (a
        forward) or its downstream one (a gradient)."""
        return self._each(cut, upstream, self.send_s) + self.send_s_per_byte * nbytes

    def recv(self, nbytes: float, cut: str | None = None, upstream: bool = False) -> float:
        """A message received across `cut` by its downstream rank (a forward) or its
        upstream one (a gradient)."""
        return self._each(cut, upstream, self.recv_s) + self.recv_s_per_byte * nbytes


class DesOptions(HpsOptions):
    """Knobs of one simulation; `DesOptions.with_effects("all")` switches every effect on.

    The H-PS fields (share, slow_replicas, overlap, quantize) come from
    heterps_sim.core.hps.HpsOptions, as the engine's run request has them: quantize acts on
    explicit transfers (effect transfers), overlap on the all-reduce (effect allreduce).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(_either,),
                              allow_inf_nan=False)

    schedule: Literal["gpipe", "1f1b", "async"] | None = Field(
        default=None, description="Microbatch schedule; None = the plan's.")
    num_microbatches: int | None = Field(
        default=None, ge=1, le=MAX_MICROBATCHES, description="Microbatches per step; None = the plan's when > 1, "
        "else lanes.default_microbatches (a multiple of every stage's replica count).")
    num_steps: int = Field(default=8, ge=1, le=MAX_SIM_STEPS,
                           description="Training steps simulated.")
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
    sends_leave_work: bool = Field(
        default=False, description="transfers: the sender hands each message off and goes on "
        "(the engine's isend), so the analytic boundary term (bytes / bandwidth + latency) leaves "
        "the sender's work and the message's delay is the only transfer cost: a prediction of "
        "the engine (heterps-exec validate). False keeps the analytic model's send in the work, "
        "so the effect never raises throughput.")
    jitter_cv: float = Field(default=0.1, ge=0, allow_inf_nan=False,
                             description="jitter: mean (and standard deviation) of the extra "
                             "delay of each operation, as a share of its duration.")
    straggler_fraction: float = Field(
        default=0.1, ge=0, le=1, description="stragglers: share of the units (rounded) that are slow.")
    straggler_draw: Literal["share", "each"] = Field(
        default="share", description="stragglers: 'share' makes floor(fraction x units + 1/2) "
        "units slow, which ones drawn from the seed (every run holds the same count; a plan of "
        "4 units or fewer none at 0.1); 'each' makes each unit slow with probability fraction, "
        "drawn from the seed (a run of one unit is slow one seed in ten at 0.1): what whole "
        "jobs rented on fresh hosts draw (planner/episodes.py).")
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
        "seconds) rows (heterps-exec profile's links JSON, 'allreduce'); a stage's all-reduce "
        "takes its time from them (linear in bytes between and beyond the measured sizes; a "
        "replica count not measured linear in k - 1 from the measured ones, "
        "des/work.measured_allreduce_seconds) instead of the formula: with more ranks than "
        "cores the ring's hops wait for descheduled members, which no bandwidth/latency "
        "formula has.")
    allreduce_cpu_measured: tuple[tuple[int, float, float], ...] | None = Field(
        default=None, description="cores: each member's measured process CPU in one "
        "all-reduce on the host, as (ranks, bytes, CPU seconds) rows (the links JSON's "
        "'allreduce' cpu_s): what a continuous schedule's ring, running beside compute, "
        "takes from the cores (read as allreduce_measured); None: composed from message_cpu, "
        "2(k - 1) chunk sends and receives.")
    param_bytes: tuple[float, ...] | None = Field(
        default=None, description="allreduce: dense parameter bytes per layer; None = "
        "problem.param_bytes (0 when the problem has none).")
    ps: PsOptions | None = Field(
        default=None, description="ps: shards and tiers; None = the problem's (Problem.ps, "
        "a scenario's ps: section). Set, they replace the problem's: the embedding layers' PS "
        "time in the work changes by the difference (cost/ps_traffic.py).")
    host_cores: int = Field(default=2, ge=1, description="cores: CPU cores of the one host "
                            "every replica shares.")
    core_sharing: Literal["fifo", "fair"] = Field(
        default="fifo", description="cores: a computation waits for a free core and then "
        "holds it (fifo), or all running computations share the cores, each at "
        "min(1, cores / running) speed, as an OS time-slices them (fair; des/fair_cores.py).")
    cpu_share: tuple[float, ...] | None = Field(
        default=None, description="cores: per stage, the share of its compute that holds a "
        "core (1 / slowdown for a type emulated by dilation); None = 1 for every stage.")
    message_cpu: MessageCpu | None = Field(
        default=None, description="cores (with transfers): each boundary message's CPU on the "
        "one host, added to the operation that sends it and to the one that receives it "
        "(des/work.py); None: messages hold no core.")
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
