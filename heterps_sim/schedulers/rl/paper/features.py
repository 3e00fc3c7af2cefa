"""What the RL policy (and the Gymnasium environment) sees of a problem: numpy only.

Every feature is per layer or per (layer, type) and scale-free (times are divided by the time
budget B/TL a stage may take per batch, prices and bandwidths by their median), so one policy
reads problems of any L and any M: the policy scores each type with a shared head from that
type's features, never from a type index.

    layer features   (L, NUM_LAYER_FEATURES): position, first/last, the layer's fastest time,
                     its boundary transfer, share of runnable types, log sizes, L and M
    type features    (L, M, NUM_TYPE_FEATURES): runnable, time/budget, alpha, IO share, whether
                     the layer alone meets TL on the type and with how many units, its cost
                     relative to the layer's cheapest type, price, bandwidth, cap, boundary time
    dynamic features (M, NUM_DYNAMIC_FEATURES) given the previous layer's type p: "j == p" and
                     the boundary transfer a switch p -> j would add (0 when j == p)
    mask             (L, M): runnable and not a type with 0 units available

Units, "meets TL alone" and the least cost per batch come from the problem's own cost model
(cost/provision.py): under the default model they count the all-reduce, the fixed costs,
memory and the minimum batch per unit; under the paper model they are as HeterPS computes them.

`FeatureNorm` standardises the static features with means/stds fitted on training problems
(kept in checkpoints so a trained policy reads new problems the same way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heterps_sim.core.problem import Problem
from heterps_sim.cost.provision import provision
from heterps_sim.cost.reference import MAX_REPLICAS
from heterps_sim.cost.terms import boundary_latency_s

LAYER_FEATURES = ("position", "is_first", "is_last", "log_fastest_time", "log_boundary_time",
                  "runnable_share", "log_param_bytes", "log_sparse_bytes", "log_num_layers",
                  "log_num_types", "io_share_fastest", "log_cost_share")
TYPE_FEATURES = ("runnable", "log_time", "alpha", "io_share", "alone_ok", "log_units_alone",
                 "log_rel_cost_alone", "log_rel_cost_per_sample", "log_price", "log_network",
                 "capped", "log_cap", "log_boundary_time")
DYNAMIC_FEATURES = ("is_previous", "log_switch_time")
NUM_LAYER_FEATURES = len(LAYER_FEATURES)
NUM_TYPE_FEATURES = len(TYPE_FEATURES)
NUM_DYNAMIC_FEATURES = len(DYNAMIC_FEATURES)
CLIP = 10.0
"""Every feature is clipped to [-CLIP, CLIP] (the environment's Box bounds)."""
_TINY = 1e-6


def _log(x) -> np.ndarray:
    return np.log10(np.asarray(x, np.float64) + _TINY)


@dataclass(frozen=True, slots=True)
class Encoding:
    """One problem as the policy reads it (float32 features, bool mask)."""

    layer: np.ndarray
    """(L, NUM_LAYER_FEATURES)"""
    types: np.ndarray
    """(L, M, NUM_TYPE_FEATURES)"""
    mask: np.ndarray
    """(L, M) bool: the type may be chosen for the layer"""
    switch_bytes: np.ndarray
    """(L,) boundary bytes entering layer i from layer i-1 (0 for i = 0), over the budget"""
    network: np.ndarray
    """(M,) bytes/s per type"""
    latency_over_budget: float


def action_mask(problem: Problem) -> np.ndarray:
    """(L, M) bool: layer i may run on type j (runnable, and the type has units available)."""
    has_units = np.array([a is None or a > 0 for a in problem.available], bool)
    return problem.runnable & has_units[None, :]


@dataclass(frozen=True, slots=True)
class _Derived:
    """Arrays the features are made of (masked entries 0 or inf)."""

    budget: float
    """B / TL: the seconds a stage may take per batch"""
    mask: np.ndarray
    total: np.ndarray
    """(L, M) one unit's oct + odt"""
    odt: np.ndarray
    alpha: np.ndarray
    units: np.ndarray
    """(L, M) least units meeting TL with the layer alone as a stage (no boundary)"""
    alone_ok: np.ndarray
    """(L, M) the layer alone meets TL on the type within its cap"""
    per_sample: np.ndarray
    """(L, M) price x one unit's time: the layer's least cost per batch on the type"""
    price: np.ndarray
    net: np.ndarray
    bnd: np.ndarray
    caps: np.ndarray


def _derive(problem: Problem) -> _Derived:
    budget = problem.batch_size / problem.throughput_limit
    mask, run = action_mask(problem), problem.runnable
    oct_s, odt_s = np.where(run, problem.oct_s, 0.0), np.where(run, problem.odt_s, 0.0)
    alpha = np.where(run, problem.alpha, 0.0)
    total = oct_s + odt_s
    par, ser = (total, 0.0) if problem.odt_parallel else (oct_s, odt_s)
    caps = np.array([MAX_REPLICAS if a is None else min(a, MAX_REPLICAS)
                     for a in problem.available], np.float64)
    # the layer alone as a stage, under the problem's own model (cost/provision.py)
    layer = np.arange(problem.num_layers)[:, None]
    pr = provision(problem, par, ser, alpha, layer, layer,
                   np.arange(problem.num_types)[None, :], budget)
    units = pr.units
    price = np.asarray(problem.price_per_hour, np.float64)
    return _Derived(
        budget=budget, mask=mask, total=total, odt=odt_s, alpha=alpha, units=units,
        alone_ok=mask & pr.ok & (units <= caps[None, :]),
        per_sample=np.where(mask, price[None, :] * pr.unit_s, np.inf), price=price,
        net=np.asarray(problem.network_bytes_per_s, np.float64),
        bnd=np.asarray(problem.boundary_bytes, np.float64), caps=caps)


def _relative(values: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """log10(value / the row's least value) where ok, else 6 (a millionfold)."""
    best = np.where(ok, values, np.inf).min(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = _log(values / best)
    return np.minimum(np.where(ok & np.isfinite(best), rel, 6.0), 6.0)


def _layer_features(problem: Problem, d: _Derived) -> np.ndarray:
    num_l, num_m = problem.num_layers, problem.num_types
    fastest = np.where(d.mask, d.total, np.inf)
    best_type = fastest.argmin(axis=1)
    fastest = fastest.min(axis=1)
    fastest = np.where(np.isfinite(fastest), fastest, d.budget * 1e6)
    cheapest = d.per_sample.min(axis=1)
    cheapest = np.where(np.isfinite(cheapest), cheapest, 0.0)

    def sizes(a) -> np.ndarray:
        return np.zeros(num_l) if a is None else np.log10(1.0 + np.asarray(a, np.float64)) / 10

    return np.stack([
        np.arange(num_l) / max(num_l - 1, 1),
        np.arange(num_l) == 0,
        np.arange(num_l) == num_l - 1,
        _log(fastest / d.budget),
        _log(d.bnd / np.median(d.net) / d.budget),
        d.mask.mean(axis=1),
        sizes(problem.param_bytes),
        sizes(problem.sparse_bytes),
        np.full(num_l, np.log10(num_l) / 2),
        np.full(num_l, np.log10(num_m) / 2),
        d.odt[np.arange(num_l), best_type] / np.maximum(fastest, _TINY * d.budget),
        _log(cheapest / max(cheapest.sum(), 1e-300)),
    ], axis=1)


def _type_features(problem: Problem, d: _Derived) -> np.ndarray:
    capped = np.array([a is not None for a in problem.available], np.float64)
    rate_alone = d.price[None, :] * d.units
    per_type = np.stack(np.broadcast_arrays(
        d.mask,
        _log(d.total / d.budget),
        d.alpha,
        d.odt / np.maximum(d.total, _TINY * d.budget),
        d.alone_ok,
        np.where(d.alone_ok, np.log10(d.units), 0.0),
        _relative(rate_alone, d.alone_ok),
        _relative(d.per_sample, d.mask),
        _log(d.price / np.median(d.price))[None, :],
        _log(d.net / np.median(d.net))[None, :],
        capped[None, :],
        np.where(capped > 0, np.log10(1 + d.caps), 0.0)[None, :],
        _log(d.bnd[:, None] / d.net[None, :] / d.budget),
    ), axis=-1)
    return np.where(d.mask[..., None], per_type, 0.0)


def encode(problem: Problem) -> Encoding:
    """The raw (unnormalised, clipped) features of a problem."""
    d = _derive(problem)
    return Encoding(
        layer=np.clip(_layer_features(problem, d), -CLIP, CLIP).astype(np.float32),
        types=np.clip(_type_features(problem, d), -CLIP, CLIP).astype(np.float32),
        mask=d.mask, switch_bytes=np.concatenate([[0.0], d.bnd[:-1]]) / d.budget,
        network=d.net, latency_over_budget=float(boundary_latency_s(problem)) / d.budget)


def dynamic_features(enc: Encoding, layer: int, previous: int | None) -> np.ndarray:
    """(M, NUM_DYNAMIC_FEATURES) for `layer` given the previous layer's type (None: first)."""
    num_m = enc.network.shape[0]
    out = np.zeros((num_m, NUM_DYNAMIC_FEATURES), np.float32)
    if previous is None or layer == 0:
        return out
    out[previous, 0] = 1.0
    seconds = enc.switch_bytes[layer] / np.minimum(enc.network[previous], enc.network)
    switch = _log(seconds + enc.latency_over_budget) / 3.0
    switch[previous] = 0.0
    out[:, 1] = np.clip(switch, -CLIP, CLIP)
    return out


@dataclass(frozen=True, slots=True)
class FeatureNorm:
    """Per-feature mean and std of the static features, fitted on training problems."""

    layer_mean: np.ndarray
    layer_std: np.ndarray
    type_mean: np.ndarray
    type_std: np.ndarray

    STD_FLOOR = 0.1
    """Features nearly constant in training are scaled by at most 1/0.1 (then clipped)."""

    @classmethod
    def fit(cls, encodings: list[Encoding]) -> FeatureNorm:
        layers = np.concatenate([e.layer for e in encodings]).astype(np.float64)
        types = np.concatenate([e.types[e.mask] for e in encodings]).astype(np.float64)
        if types.size == 0:
            types = np.zeros((1, NUM_TYPE_FEATURES))
        return cls(layers.mean(0), np.maximum(layers.std(0), cls.STD_FLOOR),
                   types.mean(0), np.maximum(types.std(0), cls.STD_FLOOR))

    def apply(self, enc: Encoding) -> tuple[np.ndarray, np.ndarray]:
        """(layer, types) standardised and clipped; masked-out types stay 0."""
        layer = (enc.layer - self.layer_mean) / self.layer_std
        types = np.where(enc.mask[..., None], (enc.types - self.type_mean) / self.type_std, 0.0)
        return (np.clip(layer, -CLIP, CLIP).astype(np.float32),
                np.clip(types, -CLIP, CLIP).astype(np.float32))

    def to_dict(self) -> dict:
        return {k: [float(x) for x in getattr(self, k)]
                for k in ("layer_mean", "layer_std", "type_mean", "type_std")}

    @classmethod
    def from_dict(cls, data: dict) -> FeatureNorm:
        return cls(**{k: np.asarray(data[k], np.float64)
                      for k in ("layer_mean", "layer_std", "type_mean", "type_std")})
