"""Who holds the embedding tables, and what it costs: the priced parameter-server choices.

A problem whose PS names candidate hosts (`problem.ps.hosts`, core/ps_spec.py; a scenario's
`ps.hosts`) rents its PS: a *choice* is (host type, num_shards), one unit of a plan type per
shard. Its numbers come from that type's row of the problem:

    shard_bytes_per_s = network_bytes_per_s[j]          each shard serves over its own NIC
    price_per_hour    = num_shards x price_per_hour[j]  every plan pays it (fixed price)
    memory            = num_shards x memory_bytes[j] x ps.memory_headroom

The memory rule: every row and its optimizer state stay in the hosts' RAM,

    ps.held_bytes = table_bytes x (1 + optimizer_state_factor) <= memory

(the cold tier's disk is not counted on: conservative). A table is never counted against a
stage's memory: the roofline's per-layer test and the default model's per-unit limit count
only the rows a batch has in flight (inputs/roofline.py), whatever the table's size.

Which shard counts `ps_choices` offers, per host type j (a handful, the rule stated):

    n_mem  fewest shards whose memory holds ps.held_bytes
    n_cap  fewest shards whose capacity (cost/ps_traffic.py) moves the throughput limit's
           embedding traffic: fewer can never meet the limit (default model only; the paper
           model has no PS term, so only memory and price matter there)
    ladder n_lo = max(n_mem, n_cap) and the FINE_STEPS counts after it (just above n_cap
           the PS's capacity still caps the plan and its side of the embedding layers' odt
           is near the whole batch period, so each shard changes how many units the stages
           need: the cost is jagged there), then doubling (2 n_lo, 4 n_lo, ...) up to the
           first count whose capacity is at least CAPACITY_HEADROOM x the limit's traffic:
           there the PS's side of an embedding layer's odt is at most 1/CAPACITY_HEADROOM of
           the batch period B / TL, and doubling again halves a term already that small while
           the PS's price doubles. Other counts are not offered: a heuristic bound, not a
           proof (docs/results/2026-11-27-dlrm-criteo1tb.md checks it against every count
           from n_lo to 4 n_lo on the shipped DLRM scenario)

Then choices whose hosts move no more bytes per second than a cheaper (or equally priced)
choice's are dropped: the cost model sees a choice only through its aggregate rate
num_shards / seconds_per_byte (request times and capacity both) and its price, so such a
choice is dominated. What is left is sorted by price.

`with_ps(problem, choice)` is the same problem with that PS: shards, bandwidth, host type and
price set, and the PS's side of every embedding layer's odt_s recomputed (core/ps_odt.py); the
PS's capacity (reference.ps_cap), the fixed price (reference.fixed_price_per_hour) and the
simulator's `ps` effect read the spec from the problem, so they follow. numpy only.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from heterps_sim.core import ps_odt
from heterps_sim.core.problem import Problem
from heterps_sim.core.ps_spec import PsSpec
from heterps_sim.cost import ps_traffic

CAPACITY_HEADROOM = 16.0
"""The ladder of shard counts stops at the first count whose capacity is this many times the
throughput limit's embedding traffic (module docstring)."""
FINE_STEPS = 3
"""Consecutive counts offered after n_lo (module docstring)."""
MAX_SHARDS = 4096
"""No choice has more shards than this (a type needing more to hold the tables is left out)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PsChoice:
    """One way to rent the PS: num_shards units of host_type."""

    host_type: str
    num_shards: int
    shard_bytes_per_s: float
    """Network bandwidth of one shard: the host type's."""
    price_per_hour: float
    """USD per hour of all the shards."""
    memory_bytes: float
    """Bytes the shards may fill with rows and optimizer state (memory x headroom)."""
    aggregate_bytes_per_s: float
    """Bytes per second the shards serve together (with the problem's tier mix)."""

    @property
    def label(self) -> str:
        """'4 x r7i-8xlarge'."""
        return f"{self.num_shards} x {self.host_type}"


def spec_for(spec: PsSpec, choice: PsChoice) -> PsSpec:
    """`spec` with the choice's shards, bandwidth, host type and price."""
    return spec.model_copy(update={
        "num_shards": choice.num_shards, "shard_bytes_per_s": choice.shard_bytes_per_s,
        "host_type": choice.host_type, "price_per_hour": choice.price_per_hour})


def _choice(problem: Problem, spec: PsSpec, j: int, n: int) -> PsChoice:
    shard = float(problem.network_bytes_per_s[j])
    trial = spec.model_copy(update={"num_shards": n, "shard_bytes_per_s": shard})
    return PsChoice(host_type=problem.type_names[j], num_shards=n, shard_bytes_per_s=shard,
                    price_per_hour=n * float(problem.price_per_hour[j]),
                    memory_bytes=n * host_memory_bytes(problem, j) * spec.memory_headroom,
                    aggregate_bytes_per_s=trial.aggregate_bytes_per_s)


def host_memory_bytes(problem: Problem, j: int) -> float:
    """Memory of one unit of type j (inf when the problem does not know it)."""
    return float(problem.unit_costs.memory_bytes[j])


def shards_to_hold(spec: PsSpec, memory_bytes: float) -> int:
    """Fewest shards of memory_bytes each whose headroom holds the rows and their state."""
    if spec.held_bytes <= 0 or not math.isfinite(memory_bytes):
        return 1
    return max(1, math.ceil(spec.held_bytes / (memory_bytes * spec.memory_headroom) - 1e-12))


def _traffic_per_sample(problem: Problem) -> float:
    pulled, pushed = ps_traffic.layer_bytes(problem)
    return float(pulled.sum() + pushed.sum())


def _ladder(problem: Problem, spec: PsSpec, j: int) -> list[int]:
    """The shard counts offered for type j (module docstring), or [] when it needs too many."""
    n = shards_to_hold(spec, host_memory_bytes(problem, j))
    traffic = problem.throughput_limit * _traffic_per_sample(problem)  # bytes/s at the limit
    per_shard = 1.0 / spec.model_copy(update={
        "shard_bytes_per_s": float(problem.network_bytes_per_s[j])}).seconds_per_byte
    if problem.cost_model != "default" or traffic <= 0:
        return [n] if n <= MAX_SHARDS else []
    n_lo = max(n, math.ceil(traffic / per_shard - 1e-9))
    rungs = [n_lo + k for k in range(FINE_STEPS + 1)]
    n = 2 * n_lo
    while rungs[-1] * per_shard < CAPACITY_HEADROOM * traffic:
        rungs.append(max(n, rungs[-1] + 1))
        n *= 2
    return [r for r in rungs if r <= MAX_SHARDS]


def ps_choices(problem: Problem) -> list[PsChoice]:
    """The PS choices worth solving for (module docstring), cheapest first; [] when the
    problem's PS names no candidate hosts (a free PS: nothing to choose)."""
    spec = ps_traffic.problem_ps(problem)
    found = [_choice(problem, spec, problem.type_index(name), n)
             for name in spec.hosts for n in _ladder(problem, spec, problem.type_index(name))]
    found.sort(key=lambda c: (c.price_per_hour, -c.aggregate_bytes_per_s, c.host_type))
    kept, best_rate = [], -math.inf
    for c in found:  # by price: keep a choice only if it serves faster than every cheaper one
        if c.aggregate_bytes_per_s > best_rate * (1 + 1e-12):
            kept.append(c)
            best_rate = c.aggregate_bytes_per_s
    return kept


def holds_tables(problem: Problem, choice: PsChoice) -> bool:
    """Whether the choice's hosts hold the rows and their optimizer state."""
    return ps_traffic.problem_ps(problem).held_bytes <= choice.memory_bytes * (1 + 1e-12)


def replace_ps(problem: Problem, spec: PsSpec) -> Problem:
    """The problem with `spec` as its PS: the PS's side of odt_s taken out for the old spec
    (when odt_s holds it) and added for the new one (when the model counts it)."""
    odt = problem.odt_s
    if ps_odt.odt_holds_ps_side(problem):
        odt = odt - _side(problem, problem.ps)[:, None]
    out = dataclasses.replace(problem, ps=spec, odt_s=odt)
    if ps_odt.odt_holds_ps_side(out):
        out = dataclasses.replace(out, odt_s=ps_odt.with_ps_side(odt, _side(out, spec)))
    return out


def _side(problem: Problem, spec: PsSpec) -> np.ndarray:
    return ps_odt.ps_side_s(problem.sparse_bytes, problem.batch_size, spec, problem.latency_s)


def with_ps(problem: Problem, choice: PsChoice) -> Problem:
    """The same problem whose PS is `choice` (module docstring)."""
    return replace_ps(problem, spec_for(ps_traffic.problem_ps(problem), choice))


def cheapest_choice(problem: Problem, num_shards: int | None = None) -> PsChoice | None:
    """The cheapest choice (with exactly num_shards shards when given, memory permitting),
    or None when there is none: the PS a problem starts with before the planner chooses."""
    spec = ps_traffic.problem_ps(problem)
    if num_shards is None:
        options = ps_choices(problem)
        return options[0] if options else None
    fits = [c for c in (_choice(problem, spec, problem.type_index(name), num_shards)
                        for name in spec.hosts) if holds_tables(problem, c)]
    return min(fits, key=lambda c: (c.price_per_hour, -c.aggregate_bytes_per_s), default=None)


def problem_for_plan(problem: Problem, resource: str, num_shards: int) -> Problem:
    """The problem whose PS is `num_shards` units of `resource` (a plan's `ps` entry); raises
    KeyError for a type the problem does not have."""
    spec = ps_traffic.problem_ps(problem)
    return with_ps(problem, _choice(problem, spec, problem.type_index(resource), num_shards))
