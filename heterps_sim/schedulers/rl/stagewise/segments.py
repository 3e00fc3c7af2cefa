"""What the improved `rl` policy chooses between: whole stages ("segments"). numpy only.

A plan is built stage by stage: at layer s (after the previous stage, of type p) the policy
picks a candidate (s, w, j): the next stage holds layers s..s+w on type j. Candidates are
indexed (s, w, j) with w < W = min(L, max_stage_layers); flat index a = w * M + j at a given s.
A decoded plan is a sequence of candidates covering 0..L-1; its assignment is the usual type
per layer (stages = maximal runs, so the next stage's type must differ from p: masked).

Per candidate, scale-free features (FEATURES): where it starts and ends, whether it is the last
stage, and what the stage would cost provisioned alone at the throughput limit TL (least
units k, the rate k x price per hour, the throughput those units give, the cost per sample),
against lower bounds of the plan's cost per hour (LB, the sum over layers of the cheapest
price x time / (B/TL) any type offers). The stage's outgoing boundary transfer uses its own
network bandwidth: the real one uses min(own, next), so it is never faster, and a candidate
that misses TL alone or breaks its type's cap here (`ok` false) is infeasible in every plan.
`lookahead` adds a relaxed cost to go per candidate: a DP over the candidates at a ladder of
bottleneck levels (with least provisioning a plan costs its stages' summed rates over its
slowest stage's throughput). This is knowingly approximate about everything that couples
stages (the next stage's network, shared caps, exact provisioning's faster levels, levels
between the rungs): the policy's sampling and the local polish (schedulers/search/polish.py) see the true costs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heterps_sim.core.problem import Problem
from heterps_sim.cost.provision import provision
from heterps_sim.cost.reference import MAX_REPLICAS
from heterps_sim.cost.terms import boundary_latency_s

FEATURES = ("start", "end", "length", "is_last", "ok", "log_units", "log_rate_over_lb_seg",
            "log_rate_over_lb_total", "log_lb_rest", "slack", "ceil_waste", "log_boundary_time",
            "log_price", "capped", "serial_share", "log_num_layers", "log_num_types",
            "log_throughput", "log_cost_per_sample")
NUM_FEATURES = len(FEATURES)
CLIP = 10.0
_TINY = 1e-6


@dataclass(frozen=True, slots=True)
class SegmentEncoding:
    """One problem's candidates: features (L, W, M, F) float32, masks (L, W, M) bool."""

    features: np.ndarray
    valid: np.ndarray
    """the stage may be built: every layer runs on the type, the type has units"""
    ok: np.ndarray
    """valid and the stage alone meets TL within its type's cap (see the module docstring)"""
    num_layers: int
    num_types: int
    width: int
    """W: the longest stage a candidate may be"""
    rate: np.ndarray
    """(L, W, M) price x units of the stage provisioned alone at TL, over `best` x TL (inf
    where not ok)"""
    throughput: np.ndarray
    """(L, W, M) the stage's throughput at those units, over TL"""
    rest: np.ndarray
    """(LEVELS, L, W) relaxed cost to go after the candidate per bottleneck level, in
    `rate`'s unit (lookahead)"""


def _log(x) -> np.ndarray:
    return np.log10(np.asarray(x, np.float64) + _TINY)


def encode_segments(problem: Problem, max_stage_layers: int = 64) -> SegmentEncoding:
    """Every candidate stage of `problem` with its features and masks."""
    num_l, num_m = problem.num_layers, problem.num_types
    width = max(1, min(num_l, max_stage_layers))
    budget = problem.batch_size / problem.throughput_limit
    units_ok = problem.available_array != 0
    run = problem.runnable & units_ok[None, :]
    oct_s, odt_s = np.where(run, problem.oct_s, 0.0), np.where(run, problem.odt_s, 0.0)
    aoct = np.where(run, problem.alpha, 0.0) * oct_s
    price = np.asarray(problem.price_per_hour, np.float64)
    net = np.asarray(problem.network_bytes_per_s, np.float64)
    caps = np.where(problem.available_array < 0, MAX_REPLICAS,
                    np.minimum(problem.available_array, MAX_REPLICAS)).astype(np.float64)

    def prefix(x):
        out = np.zeros((num_l + 1,) + x.shape[1:])
        out[1:] = np.cumsum(x, axis=0)
        return out

    p_oct, p_odt, p_aoct, p_bad = prefix(oct_s), prefix(odt_s), prefix(aoct), prefix(~run)
    lb_layer = np.where(run, price[None, :] * (oct_s + odt_s), np.inf).min(axis=1) / budget
    lb_layer = np.where(np.isfinite(lb_layer), lb_layer, 0.0)
    p_lb = prefix(lb_layer)
    lb_total = max(float(p_lb[-1]), _TINY)

    s = np.arange(num_l)[:, None]
    e = s + np.arange(width)[None, :]  # (L, W) last layer of the candidate
    inside = e < num_l
    e_c = np.minimum(e, num_l - 1)
    total_oct = p_oct[e_c + 1] - p_oct[s]  # (L, W, M)
    bnd_t = np.where((e_c < num_l - 1)[..., None],
                     problem.boundary_bytes[e_c][..., None] / net + boundary_latency_s(problem),
                     0.0)
    total_odt = p_odt[e_c + 1] - p_odt[s] + bnd_t
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(total_oct > 0, (p_aoct[e_c + 1] - p_aoct[s]) / total_oct, 0.0)
    par, ser = (total_oct + total_odt, 0.0) if problem.odt_parallel else (total_oct, total_odt)
    # the stage alone at TL under the problem's own model (cost/provision.py)
    pr = provision(problem, par, ser, alpha, s[..., None], e_c[..., None],
                   np.arange(num_m)[None, None, :], budget)
    slack, units = pr.slack_s, pr.units
    with np.errstate(divide="ignore", invalid="ignore"):
        # units' worth before the ceiling (paper); the default model's units come from a
        # search, not a ceiling: no waste is told
        need = alpha * par / np.where(slack > 0, slack, 1.0) \
            if problem.cost_model != "default" else units
    valid = inside[..., None] & (p_bad[e_c + 1] == p_bad[s])
    ok = valid & pr.ok & (units <= caps[None, None, :])
    rate = price[None, None, :] * units
    lb_seg = np.maximum(p_lb[e_c + 1] - p_lb[s], _TINY)[..., None]
    lb_rest = (p_lb[-1] - p_lb[e_c + 1])[..., None]
    et = pr.step_s
    with np.errstate(divide="ignore", invalid="ignore"):
        thr = np.where(ok, problem.batch_size / et, 0.0)  # at `units`: >= TL where ok
    rest, best = lookahead(rate, thr, ok, e_c, problem.throughput_limit)
    columns = (
        s / num_l, (e_c + 1) / num_l, (e_c - s + 1) / num_l, (e_c == num_l - 1),
        ok, np.where(ok, np.log10(units) / 2, 3.0),
        np.where(ok, _log(rate / lb_seg), 6.0), np.where(ok, _log(rate / lb_total), 6.0),
        _log(lb_rest / lb_total) / 2, np.clip(slack / budget, -CLIP, 1.0),
        np.where(ok, (units - need) / units, 1.0),
        np.where(bnd_t > 0, _log(bnd_t / budget), -6.0) / 2,
        _log(price / np.median(price)), problem.available_array >= 0,
        (1 - alpha) * par / budget, np.log10(num_l), np.log10(num_m),
        np.where(ok, _log(thr / problem.throughput_limit), -1.0),
        np.where(ok, _log(rate / np.maximum(thr, _TINY) / best), 6.0))
    feats = np.empty(valid.shape + (NUM_FEATURES,), np.float32)
    with np.errstate(invalid="ignore"):
        for f, col in enumerate(columns):
            col = np.asarray(col)
            feats[..., f] = col[..., None] if col.ndim == 2 else col
    np.clip(feats, -CLIP, CLIP, out=feats)
    feats[~valid] = 0.0
    feats[np.isnan(feats)] = 0.0
    unit = best * problem.throughput_limit
    return SegmentEncoding(features=feats, valid=valid, ok=ok, num_layers=num_l,
                           num_types=num_m, width=width, rate=np.where(ok, rate / unit, np.inf),
                           throughput=thr / problem.throughput_limit, rest=rest / unit)


LEVELS = 10
BASE = 2.0
"""Bottleneck levels of the relaxed lookahead: TL x BASE^l, l = 0..LEVELS-1."""


def lookahead(rate: np.ndarray, thr: np.ndarray, ok: np.ndarray, last: np.ndarray,
              limit: float) -> tuple[np.ndarray, float]:
    """(rest (LEVELS, L, W), best): the relaxed cost to go after each candidate, per level.

    With least provisioning a plan costs N/3600 x (sum of its stage rates) / (its slowest
    stage's throughput), every stage provisioned for TL alone. Relaxed (the boundary on the
    stage's own network, no shared caps): at level theta, V(s) = the least sum of rates of
    `ok` stages covering layers s.. whose throughputs are all >= theta (a DP over the
    candidates); rest = V(e + 1). best = min over levels of V(0) / theta: the relaxed
    optimum, the unit of every cost here (so 1.0 is "as cheap as the relaxation can see").
    """
    num_l = ok.shape[0]
    nxt = np.minimum(last + 1, num_l)
    rest = np.empty((LEVELS,) + last.shape)
    best = np.inf
    for level in range(LEVELS):
        theta = limit * BASE ** level
        usable = ok & (thr >= theta)
        value = np.full(num_l + 1, np.inf)
        value[num_l] = 0.0
        for s in range(num_l - 1, -1, -1):
            value[s] = np.where(usable[s], rate[s] + value[nxt[s]][:, None], np.inf).min()
        rest[level] = value[nxt]
        best = min(best, value[0] / theta)
    return rest, (best if np.isfinite(best) and best > 0 else 1.0 / limit)


def assignment_to_segments(assignment: np.ndarray) -> list[tuple[int, int, int]]:
    """[(start, w, type)] of the stages (maximal runs) of a type-per-layer assignment."""
    a = np.asarray(assignment)
    cuts = np.flatnonzero(a[1:] != a[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(a)]))
    return [(int(s), int(e - s - 1), int(a[s])) for s, e in zip(starts, ends)]


def fits(enc: SegmentEncoding, segments: list[tuple[int, int, int]]) -> bool:
    """Every stage is a valid candidate (no longer than W, runnable)."""
    return all(w < enc.width and enc.valid[s, w, j] for s, w, j in segments)
