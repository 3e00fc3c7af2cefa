"""Random numeric problems for oracle tests (brute force, reference vs batch evaluators)."""

from __future__ import annotations

import numpy as np

from heterps_sim.problem import Problem


def random_problem(rng: np.random.Generator, num_layers: int, num_types: int, *,
                   caps: bool = False, unrunnable: float = 0.1, odt_parallel: bool | None = None,
                   limit_quantile: float | None = None) -> Problem:
    """A small random problem; ~`unrunnable` of (layer, type) entries are null.

    The throughput limit is drawn relative to what single units reach, so instances range from
    easy to infeasible.
    """
    L, M = num_layers, num_types
    batch = int(rng.choice([32, 128, 512]))
    oct_s = rng.lognormal(-4.0, 1.2, size=(L, M))
    odt_s = rng.lognormal(-5.0, 1.5, size=(L, M)) * (rng.random((L, M)) < 0.7)
    alpha = rng.uniform(0.5, 0.99, size=(L, M))
    mask = rng.random((L, M)) < unrunnable
    mask[np.arange(L), rng.integers(0, M, size=L)] = False  # every layer runs somewhere
    for a in (oct_s, odt_s, alpha):
        a[mask] = np.nan
    single = batch / np.nanmax(oct_s + odt_s)
    q = float(np.exp(rng.uniform(np.log(0.1), np.log(30.0)))) if limit_quantile is None else limit_quantile
    available = tuple(int(rng.integers(1, 12)) if caps and rng.random() < 0.6 else None
                      for _ in range(M))
    return Problem(
        name="random", batch_size=batch, throughput_limit=float(single * q),
        num_samples=float(rng.integers(1, 100) * 1e6), oct_s=oct_s, odt_s=odt_s, alpha=alpha,
        odt_parallel=bool(rng.random() < 0.7) if odt_parallel is None else odt_parallel,
        boundary_bytes=rng.lognormal(13, 2, size=L) * (np.arange(L) < L - 1),
        network_bytes_per_s=rng.choice([1.25e9, 3.1e9, 12.5e9, 50e9], size=M),
        latency_s=float(rng.choice([0.0, 5e-5, 1e-3])),
        price_per_hour=rng.uniform(0.1, 10.0, size=M), available=available,
        type_names=tuple(f"t{j}" for j in range(M)), layer_names=tuple(f"l{i}" for i in range(L)),
        type_kinds=tuple("cpu" if j % 2 == 0 else "gpu" for j in range(M)))
